"""Every registered id makes, passes gymnasium's check_env on each backend, and vectorizes."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentunit_gym
from agentunit_gym.core import registry

EMBEDDED = {"AgentUnit/OS-v0": "local", "AgentUnit/DB-v0": "sqlite"}
CONTAINER = {"AgentUnit/OS-v0": "docker", "AgentUnit/DB-v0": "mysql"}


def test_import_registers_every_id() -> None:
    assert set(agentunit_gym.env_ids()) == {e for d in registry.domains() for e in d.env_ids}
    for env_id in agentunit_gym.env_ids():
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", sorted(EMBEDDED))
def test_check_env_embedded(env_id: str) -> None:
    env = gym.make(env_id, backend=EMBEDDED[env_id])
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.docker
@pytest.mark.parametrize("env_id", sorted(CONTAINER))
def test_check_env_container(env_id: str) -> None:
    env = gym.make(env_id, backend=CONTAINER[env_id])
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_make_with_module_prefix_without_import() -> None:
    env = gym.make("agentunit_gym:AgentUnit/DB-v0", backend="sqlite")
    try:
        obs, info = env.reset(seed=3)
        assert isinstance(obs, str) and info["backend"] == "sqlite"
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(EMBEDDED))
def test_sync_vector_env_steps_text(env_id: str) -> None:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, backend=EMBEDDED[env_id]) for _ in range(2)])
    try:
        obs, infos = envs.reset(seed=[1, 2])
        assert len(obs) == 2 and all(isinstance(o, str) and o for o in obs)
        obs, rewards, term, trunc, infos = envs.step(["not an action", "still not an action"])
        assert list(rewards) == [0.0, 0.0]
        assert not any(term) and not any(trunc)
        # gymnasium batches dict-valued info entries as a dict of per-env arrays
        assert list(infos["action_error"]["reason"]) == ["invalid_format", "invalid_format"]
    finally:
        envs.close()
