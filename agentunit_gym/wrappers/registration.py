"""Registration of every AgentUnit env id with gymnasium, with the wrappers ``gym.make`` adds.

Importing ``agentunit_gym`` calls :func:`register_envs`; call it again after installing a
domain package (with :func:`agentunit_gym.core.registry.reload` first) to add its ids.

Example:

    >>> import gymnasium as gym
    >>> from agentunit_gym.core import registry
    >>> from agentunit_gym.wrappers.registration import register_envs
    >>> registry.reload()
    >>> register_envs()
    >>> "AgentUnit/DB-v0" in gym.registry
    True
"""

from __future__ import annotations

from agentunit_gym.core import registry
from agentunit_gym.wrappers.limits import EndTruncatedEpisode

MAKE_WRAPPERS = (EndTruncatedEpisode,)
"""What ``gym.make`` of an AgentUnit id puts over the env. gymnasium applies ``TimeLimit`` for
``make(..., max_episode_steps=N)`` without telling the env; :class:`EndTruncatedEpisode`,
outside it, ends such an episode as TLE with a score."""


def register_envs() -> None:
    """Register every domain's env ids with gymnasium, each made with :data:`MAKE_WRAPPERS`
    (idempotent). ``Remote-v0`` is not a domain's: :mod:`agentunit_gym.serve.registration`
    registers it."""
    registry.register_envs(wrappers=MAKE_WRAPPERS)
