"""Transitional view of the registered envs for the evaluator, until it reads
:mod:`agentunit_gym.core.registry` directly (removed with the evaluator split)."""

from __future__ import annotations

from dataclasses import dataclass

from agentunit_gym.core import registry


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    domain: str


def _entries() -> tuple[EnvEntry, ...]:
    return tuple(EnvEntry(spec.id, spec.entry_point, d.name) for d in registry.domains() for spec in d.envs)


ENVS: tuple[EnvEntry, ...] = _entries()
