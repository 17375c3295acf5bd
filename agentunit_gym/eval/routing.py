"""Which env and backend an env id runs on: id spelling, domain lookup, backend choice, the env factory.

Kept together (and small) because these are the evaluator's only domain-aware functions:
they are the ones that read the domain registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from agentunit_gym.core import registry
from agentunit_gym.errors import ConfigError

EnvFactory = Callable[[str, dict[str, Any]], gym.Env[str, str]]
"""Makes one env (the standard stack) for an env id and options."""


def full_env_id(env_id: str) -> str:
    """``OS-v0`` -> ``AgentUnit/OS-v0``; full ids pass through.

    A short id no registered domain declares (an env registered with gymnasium directly)
    takes the ``AgentUnit/`` namespace.
    """
    full = registry.full_env_id(env_id)
    return full if "/" in full else f"AgentUnit/{full}"


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


def default_env_factory(env_id: str, options: dict[str, Any]) -> gym.Env[str, str]:
    """The standard evaluation stack (``make_eval_env``); the bare env if the stack is missing.

    ``options`` may hold ``max_seconds`` and ``trap_rate`` (for the stack) and env keyword
    arguments such as ``backend``.
    """
    try:
        from agentunit_gym.wrappers.stack import make_eval_env
    except ImportError:
        bare = {k: v for k, v in options.items() if k not in ("max_seconds", "trap_rate")}
        return gym.make(env_id, **bare)
    stack_options = {k: v for k, v in options.items() if not (k == "trap_rate" and v is None)}
    return make_eval_env(env_id, **stack_options)


__all__ = ["EnvFactory", "backend_for", "default_env_factory", "env_domain",
           "full_env_id"]
