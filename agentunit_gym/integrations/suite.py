"""The episodes an evaluation framework plays for one env: what ``agentunit-gym eval`` would run.

:func:`resolve_suite` takes an env id and the evaluator's selection settings (backend, split,
task file or generated set, ``n`` and ``seed``, task ids) and returns a :class:`Suite`: the env
options the evaluator would make the env with (in tool-calls-only mode) and its planned
episodes, the same tasks with the same seeds (:func:`~agentunit_gym.eval.plan.work.plan`). The
inspect_ai adapter (:mod:`agentunit_gym.integrations.inspect`) turns one into an inspect task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentunit_gym.core.generation import domain_for_env
from agentunit_gym.core.registry import env_ids
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import check_task_paths, default_env_factory, full_env_id
from agentunit_gym.eval.plan.work import WorkItem, left_out_tasks, list_tasks, plan
from agentunit_gym.eval.run.runner import env_options
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.protocols import DEFAULT_PROTOCOL, ProtocolName, default_invalid_policy

GENERATED_PREFIX = "generated:"
"""How a ``tasks`` argument names a generated set (``generated:ENV:SPLIT:COUNT[:SEED]``)."""



@dataclass(frozen=True)
class Suite:
    """What one task of a framework plays: an env id, the evaluator's env options for it, the episodes.

    Made by :func:`resolve_suite`; the options are what ``agentunit-gym eval`` would make the
    env with (:func:`~agentunit_gym.eval.run.runner.env_options`), plus ``action_format="tools"``.
    """

    env_id: str
    options: dict[str, Any]
    items: tuple[WorkItem, ...]
    instructions: dict[str, str] = field(default_factory=dict)
    """Each task's instruction (the sample's input; the model is sent the env's own prompt)."""

    def make_env(self) -> gym.Env[str, str]:
        """A new env copy for one episode."""
        return default_env_factory(self.env_id, dict(self.options))


def resolve_suite(env: str, *, split: str | None = None, tasks: str | None = None, n: int | None = None,
                  seed: int = 0, backend: str | None = None, task_ids: Sequence[str] = (),
                  env_kwargs: Mapping[str, Any] | None = None, protocol: ProtocolName = DEFAULT_PROTOCOL,
                  agentbench_root: str | None = None) -> Suite:
    """The episodes ``agentunit-gym eval`` would run for these settings (one run each).

    Args:
        env: the env id (``DB-v0`` or ``AgentUnit/DB-v0``).
        split: only the tasks of this split (``train``, ``test``); None for all.
        tasks: a task file or folder, or ``generated:ENV:SPLIT:COUNT[:SEED]`` (what ``agentunit-gym
            tasks generate`` writes); None for the bundled suite.
        n: tasks sampled (seeded by ``seed``, as ``eval -n``); None for all.
        seed: the run's seed: the sample of ``n`` and each episode's seed.
        backend: the env's backend; None for ``auto`` (the embedded one where there is one).
        task_ids: only these tasks.
        env_kwargs: other env options (``max_steps`` ...), as ``--env-option``.
        protocol: the evaluation protocol, as ``eval --protocol`` (its turn limit, endings, caps and
            tool names; the episodes still take tool calls only).
        agentbench_root: an AgentBench checkout whose prompts open episodes under ``agentbench``.

    Raises:
        ConfigError: an unknown env id, a generated set of another domain, filters that leave nothing.
        TaskFileError, NoTasksError: a task path that cannot be read or from which no task loads.
    """
    env_id = full_env_id(env)
    if env_id not in env_ids():
        raise ConfigError(f"unknown AgentUnit env id {env!r}; the ids are {', '.join(env_ids())}.")
    extra: dict[str, Any] = dict(env_kwargs or {})
    if split is not None:
        extra["split"] = split
    paths: tuple[str, ...] = ()
    generated = None
    if tasks is not None and tasks.startswith(GENERATED_PREFIX):
        generated = _generated_tasks(tasks, env_id)
    elif tasks is not None:
        paths = (str(Path(tasks).resolve()),)
        check_task_paths(paths, (env_id,))
    config = EvalConfig(envs=(env_id,), backends=(backend or "auto",), n=n, seed=seed, task_ids=tuple(task_ids),
                        tasks=paths, env_options=extra, protocol=protocol,
                        invalid_action=default_invalid_policy(protocol), agentbench_root=agentbench_root)
    options = env_options(config, env_id)
    if generated is not None:
        options["tasks"] = generated
    options["action_format"] = "tools"
    probe = default_env_factory(env_id, dict(options))
    try:
        pairs = list_tasks(probe)
        left_out = left_out_tasks(env_id, probe)
        instructions = {t.id: t.instruction for t in agent_env(probe).tasks}
    finally:
        probe.close()
    items = plan(config, {env_id: pairs}, left_out)
    return Suite(env_id, options, tuple(items), instructions)


def _generated_tasks(spec: str, env_id: str) -> list[Any]:
    from agentunit_gym.core.task_sets import load_task_set

    found = load_task_set(spec)
    if found.domain.name != domain_for_env(env_id).name:
        raise ConfigError(f"{spec} holds {found.domain.name} tasks, and {env_id} plays "
                          f"{domain_for_env(env_id).name} tasks; name a generated set of its domain.")
    return list(found.tasks)


__all__ = ["GENERATED_PREFIX", "Suite", "resolve_suite"]
