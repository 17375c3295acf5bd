"""Which env and backend an env id runs on: id spelling, domain lookup, backend choice, the env factory.

Kept together (and small) because these are the evaluator's only domain-aware functions:
they are the ones that read the domain registry.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from agentunit_gym.core import registry
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from agentunit_gym.core.task_sources import TaskSource

EnvFactory = Callable[[str, dict[str, Any]], gym.Env[str, str]]
"""Makes one env (the standard stack) for an env id and options."""


def full_env_id(env_id: str) -> str:
    """``OS-v0`` -> ``AgentUnit/OS-v0``; full ids pass through.

    A short id no registered domain declares (an env registered with gymnasium directly)
    takes the ``AgentUnit/`` namespace.
    """
    full = registry.full_env_id(env_id)
    return full if "/" in full else f"AgentUnit/{full}"


def registered_env_ids() -> list[str]:
    """Every env id of every registered domain (a run's default)."""
    return registry.env_ids()


def env_domain(env_id: str) -> str | None:
    """The name of the registered domain that owns ``env_id``, None for an unknown id."""
    domain = registry.domain_of_env(env_id)
    return domain.name if domain is not None else None


def backend_for(env_id: str, backends: Sequence[str]) -> str:
    """The backend of ``env_id`` among ``backends``: the one its domain declares, else ``auto``.

    Backend names come from the registered domains' descriptions; a name two domains share
    (``embedded``) applies to both.

    Raises:
        ConfigError: an unknown backend name, or two backends of one domain.
    """
    kinds = {d.name: d.backend_names for d in registry.domains()}
    known = {"auto", *(name for names in kinds.values() for name in names)}
    for b in backends:
        if b not in known:
            raise ConfigError(f"unknown backend {b!r}: use {', '.join(sorted(known))}.")
    kind = kinds.get(env_domain(env_id) or "", ())
    mine = [b for b in backends if b in kind]
    if len(mine) > 1:
        raise ConfigError(f"two backends for {env_id}: {mine}; give one.")
    return mine[0] if mine else "auto"


def network_options(env_id: str, network: bool) -> dict[str, Any]:
    """``{"network": True}`` when the run asks for the network and ``env_id``'s domain takes it
    (:attr:`~agentunit_gym.core.domain.Domain.network`); else ``{}``: the env is unaffected."""
    domain = registry.domain_of_env(env_id)
    return {"network": True} if network and domain is not None and domain.network else {}


@functools.lru_cache(maxsize=8)
def _sources_of(paths: tuple[str, ...]) -> list[TaskSource]:
    from agentunit_gym.core.task_sources import load_sources

    return load_sources(paths, require_tasks=True)


@functools.lru_cache(maxsize=8)
def _tasks_of(paths: tuple[str, ...]) -> dict[str, list[TaskSpec]]:
    from agentunit_gym.core.task_sources import tasks_by_domain

    return tasks_by_domain(_sources_of(paths))


def task_options(env_id: str, paths: Sequence[str]) -> dict[str, Any]:
    """``{"tasks": [...]}`` when the ``--tasks`` paths hold tasks of ``env_id``'s domain, else ``{}``
    (the env keeps its bundled suite). Read once per process for the same paths.

    Raises:
        TaskFileError: a path that no domain can read; ``NoTasksError``: one no task loads from.
    """
    if not paths:
        return {}
    name = env_domain(env_id)
    found = _tasks_of(tuple(paths)).get(name or "")
    return {"tasks": list(found)} if found else {}


def task_domains(paths: Sequence[str]) -> list[str]:
    """The names of the domains the ``--tasks`` paths hold tasks of, in registry order."""
    found = _tasks_of(tuple(paths))
    return [d.name for d in registry.domains() if d.name in found]


def check_task_paths(paths: Sequence[str], env_ids: Sequence[str]) -> None:
    """Refuse ``--tasks`` paths a run would not use, before anything runs: a path from which no
    task loads, or whose tasks are all of domains with no env in the run (``--env`` names others).
    Either way the run would otherwise go on with the bundled suites alone.

    Raises:
        NoTasksError: no task loads from a path (each such path and its problems named).
        TaskFileError: a path that does not exist or no domain can read.
        ConfigError: a path whose tasks no env of the run takes.
    """
    if not paths:
        return
    sources = _sources_of(tuple(paths))  # every path gives tasks, or NoTasksError names those that do not
    run_domains = {env_domain(full_env_id(e)) for e in env_ids}
    for path in paths:
        held = sorted({s.domain.name for s in sources if s.path == Path(path) and s.result.tasks})
        if not run_domains & set(held):
            envs = " ".join(f"--env {registry.get_domain(name).envs[0].short_id}" for name in held)
            raise ConfigError(f"{path} holds tasks of the {', '.join(held)} domain, and no env of this run "
                              f"({', '.join(env_ids)}) takes them; add {envs}, or leave out --env to run "
                              "the domains the paths hold.")


def default_env_factory(env_id: str, options: dict[str, Any]) -> gym.Env[str, str]:
    """The standard evaluation stack, :func:`~agentunit_gym.wrappers.stack.make_eval_env`, with ``options``.

    ``options`` are :func:`~agentunit_gym.eval.run.runner.env_options`' (the stack's keywords, the
    ``protocol`` and ``agentbench_root`` the stack applies, and env keyword arguments such as
    ``backend``); a ``trap_rate`` of None is left out (the stack's default).
    """
    from agentunit_gym.wrappers.stack import make_eval_env

    return make_eval_env(env_id, **{k: v for k, v in options.items() if not (k == "trap_rate" and v is None)})


__all__ = ["EnvFactory", "backend_for", "check_task_paths", "default_env_factory", "env_domain", "full_env_id",
           "network_options", "registered_env_ids", "task_domains", "task_options"]
