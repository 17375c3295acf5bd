"""Every registered id makes, passes gymnasium's check_env on each backend, and vectorizes."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentunit_gym
from agentunit_gym.core import registry
from agentunit_gym.errors import ConfigError

EMBEDDED = {"AgentUnit/OS-v0": "local", "AgentUnit/DB-v0": "sqlite"}
CONTAINER = {"AgentUnit/OS-v0": "docker", "AgentUnit/DB-v0": "mysql"}


BUILT_IN = {
    "AgentUnit/OS-v0": ("agentunit_gym.domains.os.env:OSEnv", "os"),
    "AgentUnit/DB-v0": ("agentunit_gym.domains.db.env:DBEnv", "db"),
    "AgentUnit/KG-v0": ("agentunit_gym.domains.kg.env:KGEnv", "kg"),
    "AgentUnit/WebShop-v0": ("agentunit_gym.domains.webshop.env:WebShopEnv", "webshop"),
}
"""The built-in ids, written down here rather than read from the registry under test."""
EMBEDDED_ALL = {"AgentUnit/OS-v0": "local", "AgentUnit/DB-v0": "sqlite", "AgentUnit/KG-v0": "embedded",
                "AgentUnit/WebShop-v0": "embedded"}


def test_import_registers_every_built_in_id_with_its_env_class() -> None:
    ids = agentunit_gym.env_ids()
    assert ids == sorted(ids) and set(BUILT_IN) <= set(ids)
    # Gymnasium's registry is the other store: every AgentUnit id there is one we list, or
    # another spelling of one that refuses with the right id (the spelling hints).
    by_name = {i.lower(): i for i in ids}
    for registered in [i for i in gym.registry if i.startswith("AgentUnit/") and i != "AgentUnit/Remote-v0"]:
        assert registered.lower() in by_name, registered
        if registered not in ids:
            with pytest.raises(ConfigError, match=f"did you mean {by_name[registered.lower()]}\\?"):
                gym.make(registered)
    for env_id, (entry_point, domain) in BUILT_IN.items():
        assert gym.spec(env_id).entry_point == entry_point
        env = gym.make(env_id, backend=EMBEDDED_ALL[env_id])
        try:
            assert env.unwrapped.spec is not None and env.unwrapped.spec.id == env_id
            assert type(env.unwrapped).__module__ + ":" + type(env.unwrapped).__name__ == entry_point
            assert env.unwrapped.domain == domain
        finally:
            env.close()


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
    # A fresh interpreter: in this one the test session has imported agentunit_gym already.
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'agentunit_gym' not in sys.modules\n"
        "env = gym.make('agentunit_gym:AgentUnit/DB-v0', backend='sqlite')\n"
        "obs, info = env.reset(seed=3)\n"
        "print(type(obs).__name__, info['backend'], 'agentunit_gym' in sys.modules)\n"
        "env.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["str", "sqlite", "True"]


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


def test_each_backend_a_domain_lists_is_one_its_factory_knows() -> None:
    # The description names backends and the factory that opens them (Domain.backend_factory,
    # the router every env opens its backend through): a domain cannot list a kind its
    # factory rejects.
    from agentunit_gym.core.domain import import_object

    checked = 0
    for domain in registry.domains():
        # auto falls back to the embedded backend, which needs no daemon
        assert not domain.embedded_backend.needs_docker
        if domain.backend_factory is None:
            continue
        kinds = import_object(domain.backend_factory.partition(":")[0] + ":KINDS")
        assert set(domain.backend_names) <= set(kinds), domain.name
        checked += len(domain.backend_names)
    assert checked >= 8
