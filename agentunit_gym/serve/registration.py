"""``AgentUnit/Remote-v0``, registered by the layer it belongs to.

Importing ``agentunit_gym`` calls :func:`register_remote` beside the domains' registration;
the env's module (and its ``websockets`` client) is imported only when the env is made.

Example:

    >>> import gymnasium as gym
    >>> from agentunit_gym.serve.registration import REMOTE_ENV_ID, register_remote
    >>> register_remote()
    >>> gym.spec(REMOTE_ENV_ID).entry_point
    'agentunit_gym.serve.remote:RemoteEnv'
"""

from __future__ import annotations

import gymnasium as gym

REMOTE_ENV_ID = "AgentUnit/Remote-v0"
"""Plays one session of a served env (``agentunit-gym serve``; docs/serving.md)."""


def register_remote() -> None:
    """Register :data:`REMOTE_ENV_ID` with gymnasium (idempotent). No passive env checker, as
    for the domains' ids: the served env's own checks apply."""
    if REMOTE_ENV_ID not in gym.registry:
        gym.register(id=REMOTE_ENV_ID, entry_point="agentunit_gym.serve.remote:RemoteEnv", disable_env_checker=True)
