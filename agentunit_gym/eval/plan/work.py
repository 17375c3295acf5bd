"""The work of a run: tasks x repeats, each with a seed that depends only on what it is."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.plan.config import EvalConfig


@dataclass(frozen=True)
class WorkItem:
    """One episode to run."""

    env_id: str
    task_id: str
    run: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.env_id}|{self.task_id}|{self.run}"


def episode_seed(base: int, env_id: str, task_id: str, run: int) -> int:
    """A seed that depends only on what the episode is, not on when it runs."""
    return zlib.crc32(f"{base}|{env_id}|{task_id}|{run}".encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class LeftOut:
    """A task of the run's suites that its env cannot run here, and why (a backend that lacks
    what it needs, or the network it needs and the run does not give)."""

    env_id: str
    task_id: str
    category: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"env": self.env_id, "task": self.task_id, "reason": self.reason}


def _selected(config: EvalConfig, task_id: str, category: str) -> bool:
    """Whether the run's ``--task-id`` and ``--category`` filters keep this task."""
    categories = {c.lower() for c in config.categories}
    return (not config.task_ids or task_id in config.task_ids) and (not categories or category.lower() in categories)


def plan(config: EvalConfig, tasks_by_env: dict[str, list[tuple[str, str]]],
         left_out: Sequence[LeftOut] = ()) -> list[WorkItem]:
    """The work of a run, in a deterministic order.

    Args:
        config: the run's configuration.
        tasks_by_env: per env id, its ``(task_id, category)`` pairs on the chosen backend.
        left_out: the tasks the envs cannot run here (:func:`left_out_tasks`); a task id asked
            for that is among them is not an error, and when they are all there is, the plan
            is empty rather than an error.

    Returns:
        Work items: the filtered, sampled tasks times the repeats.

    Raises:
        ConfigError: a task id asked for that no env has, or filters that leave nothing.
    """
    items: list[WorkItem] = []
    wanted_ids = set(config.task_ids)
    found_ids: set[str] = set()
    for env_id, tasks in tasks_by_env.items():
        chosen = [(t, c) for t, c in tasks if _selected(config, t, c)]
        found_ids |= {t for t, _ in chosen}
        if config.n is not None and len(chosen) > config.n:
            rng = np.random.default_rng(zlib.crc32(f"{config.seed}|{env_id}".encode()))
            keep = sorted(rng.choice(len(chosen), size=config.n, replace=False).tolist())
            chosen = [chosen[i] for i in keep]
        for run in range(config.runs):
            for task_id, _ in chosen:
                items.append(WorkItem(env_id, task_id, run, episode_seed(config.seed, env_id, task_id, run)))
    kept_out = selected_left_out(config, left_out)
    missing = wanted_ids - found_ids - {lo.task_id for lo in kept_out}
    if missing:
        raise ConfigError(f"no env of this run has the task ids {sorted(missing)} (with these filters).")
    if not items and not kept_out:
        raise ConfigError("the filters leave no task to run: check --env, --category, --task-id and --backend.")
    return items


def selected_left_out(config: EvalConfig, left_out: Sequence[LeftOut]) -> list[LeftOut]:
    """The left-out tasks the run's ``--task-id`` and ``--category`` filters would have kept."""
    return [lo for lo in left_out if _selected(config, lo.task_id, lo.category)]


def left_out_tasks(env_id: str, env: gym.Env[str, str]) -> list[LeftOut]:
    """The tasks of the env's suite it cannot run on its backend with its network setting."""
    base = env.unwrapped
    out = []
    for task in base.suite:  # type: ignore[attr-defined]
        reason = base.not_runnable(task)  # type: ignore[attr-defined]
        if reason is not None:
            out.append(LeftOut(env_id, task.id, task.category, reason))
    return out


def left_out(env: gym.Env[str, str]) -> str | None:
    """What the env's backend (or its lack of network) leaves out of its suite, in one line
    (``left_out_note``); None when nothing."""
    from agentunit_gym.core import registry
    from agentunit_gym.tasks.spec import left_out_note

    base = env.unwrapped
    docker_backends = {b.name for d in registry.domains() for b in d.backends if b.needs_docker}
    return left_out_note(base.suite, base.backend_name, needs_docker=docker_backends,  # type: ignore[attr-defined]
                         network=base.network, refused=base.refusals())  # type: ignore[attr-defined]


def warn_left_out(env_id: str, env: gym.Env[str, str] | None, note: str | None = None) -> None:
    """Log a warning when the env's backend leaves tasks of its suite out (``note``, or
    :func:`left_out` of ``env``)."""
    note = note if env is None else left_out(env)
    if note is not None:
        logging.getLogger("agentunit_gym").warning("%s: %s", env_id, note)


def list_tasks(env: gym.Env[str, str]) -> list[tuple[str, str]]:
    """``(task_id, category)`` of every task the env can run on its backend."""
    base = env.unwrapped
    return [(t.id, t.category) for t in base.tasks]  # type: ignore[attr-defined]


__all__ = ["LeftOut", "WorkItem", "episode_seed", "left_out", "left_out_tasks", "list_tasks", "plan",
           "selected_left_out", "warn_left_out"]
