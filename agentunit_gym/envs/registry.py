"""Registration of every AgentUnit env from one table.

Bump ``-vN`` when observations, rewards or the task set of an env change.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    domain: str


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry("AgentUnit/OS-v0", "agentunit_gym.envs.os_env:OSEnv", "os"),
    EnvEntry("AgentUnit/DB-v0", "agentunit_gym.envs.db_env:DBEnv", "db"),
    EnvEntry("AgentUnit/WebShop-v0", "agentunit_gym.domains.webshop.env:WebShopEnv", "webshop"),
)


def register_all() -> None:
    """Register every env id with gymnasium (idempotent)."""
    for entry in ENVS:
        if entry.id not in gym.registry:
            # No max_episode_steps: the env enforces its own turn limit and reports it as TLE.
            gym.register(id=entry.id, entry_point=entry.entry_point, disable_env_checker=False)


def env_ids() -> list[str]:
    return [e.id for e in ENVS]
