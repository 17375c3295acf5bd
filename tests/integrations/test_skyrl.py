"""AgentUnit envs through SkyRL-Gym's own API: ``skyrl_gym.make``, ``init``, ``step``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("skyrl_gym")  # the integrations extra; installed by the test extra in CI

import skyrl_gym  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.core.registry import env_ids  # noqa: E402
from agentunit_gym.errors import ConfigError, EpisodeStateError  # noqa: E402
from agentunit_gym.integrations.skyrl import AgentUnitTextEnv, skyrl_names  # noqa: E402

CASES = [("AgentUnit/DB-v0", "sqlite"), ("AgentUnit/KG-v0", "embedded")]


def _oracle(env_id: str, backend: str) -> tuple[str, list[str]]:
    """A task of the env and its reference replies, as the oracle agent sends them."""
    env = gym.make(env_id, backend=backend)
    try:
        base: Any = env.unwrapped
        task = next(t for t in base.tasks if not any(s.from_output for s in t.reference_solution))
        return task.id, [str(base.render_action(step)) for step in task.reference_solution]
    finally:
        env.close()


def test_every_env_id_is_registered_under_both_names() -> None:
    for env_id in env_ids():
        full, alias = skyrl_names(env_id)
        assert full == env_id and alias == env_id.lower().replace("/", "-")
        assert full in skyrl_gym.registry and alias in skyrl_gym.registry
    assert skyrl_names("DB-v0") == ("AgentUnit/DB-v0", "agentunit-db-v0")


@pytest.mark.parametrize(("env_id", "backend"), CASES)
def test_an_oracle_episode_through_the_skyrl_api_earns_reward_1(env_id: str, backend: str) -> None:
    task_id, replies = _oracle(env_id, backend)
    env = skyrl_gym.make(skyrl_names(env_id)[1], env_config=DictConfig({"backend": backend}),
                         extras={"reward_spec": {"method": "env", "ground_truth": task_id}, "max_turns": 30})
    assert isinstance(env, AgentUnitTextEnv)
    try:
        messages, metadata = env.init([{"role": "user", "content": "ignored: the env builds the prompt"}])
        assert metadata["task_id"] == task_id and metadata["env_id"] == env_id
        assert messages[0]["role"] == "system" and messages[-1]["role"] == "user"
        assert task_id not in messages[0]["content"]
        outputs = []
        for reply in replies:
            out = env.step(reply)
            outputs.append(out)
            if out["done"]:
                break
        last = outputs[-1]
        assert last["done"] is True and last["reward"] == 1.0 and last["observations"] == []
        assert last["metadata"]["finish_reason"] == "complete"
        assert last["metadata"]["score"]["success"] is True and last["metadata"]["score"]["components"]
        assert all(o["reward"] == 0.0 and not o["done"] for o in outputs[:-1])
        assert all(o["observations"][0]["role"] == "user" for o in outputs[:-1])
        metrics = env.get_metrics()
        assert metrics["reward"] == 1.0 and metrics["success"] == 1.0 and metrics["steps"] == len(outputs)
    finally:
        env.close()
        env.close()  # idempotent


def test_an_invalid_reply_is_feedback_not_an_error_and_step_after_done_raises() -> None:
    task_id, _ = _oracle(*CASES[0])
    env = skyrl_gym.make("AgentUnit/DB-v0", env_config={"backend": "sqlite"},
                         extras={"extra_info": {"task_id": task_id, "seed": 3}, "max_turns": 2})
    try:
        env.init([])
        out = env.step("I am not sure what to do here.")
        assert out["done"] is False and out["reward"] == 0.0
        assert out["metadata"]["action_error"] == "no_call" and out["metadata"]["finish_reason"] is None
        assert len(out["observations"]) == 1 and out["observations"][0]["role"] == "user"
        assert out["observations"][0]["content"]
        # SkyRL's max_turns (2) ends the episode before the env's own limit.
        out = env.step("still no action")
        assert out["done"] is True and out["reward"] == 0.0
        assert out["metadata"]["finish_reason"] == "task_limit" and out["metadata"]["score"]["success"] is False
        with pytest.raises(EpisodeStateError, match="make a new env"):
            env.step("Action: Answer\nFinal Answer: []")
    finally:
        env.close()
    with pytest.raises(EpisodeStateError, match="after close"):
        env.step("x")


def test_tools_style_and_config_errors() -> None:
    task_id, _ = _oracle(*CASES[0])
    env = skyrl_gym.make("agentunit-db-v0", env_config={"backend": "sqlite", "style": "tools", "examples": False},
                         extras={"task_id": task_id})
    try:
        with pytest.raises(EpisodeStateError, match="before init"):
            env.step("x")
        messages, _ = env.init([])
        assert [m["role"] for m in messages] == ["system", "user"]
        out = env.step('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}')
        assert out["observations"][0]["role"] == "tool"
    finally:
        env.close()
    with pytest.raises(ConfigError, match="unknown env_config key"):
        skyrl_gym.make("agentunit-db-v0", env_config={"backnd": "sqlite"}, extras={})
    with pytest.raises(ConfigError, match="max_turns"):
        skyrl_gym.make("agentunit-db-v0", env_config={"backend": "sqlite"}, extras={"max_turns": 0})


def test_the_training_docs_skyrl_example_runs() -> None:
    """docs/training.md's SkyRL-Gym example runs as written and earns what its comments say."""
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    code = re.search(r"### SkyRL-Gym\n.*?```python\n(.*?)```\n", docs, re.DOTALL)
    assert code is not None
    scope: dict[str, Any] = {}
    exec(compile(code.group(1), "docs/training.md", "exec"), scope)
    assert (scope["out"]["reward"], scope["out"]["done"]) == (1.0, True)
    assert scope["env"].get_metrics()["score/exact_match"] == 1.0


def test_a_backend_failure_raises_typed_and_closes_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead backend is never a reward: step raises it (SkyRL's batch fails visibly) and frees the env."""
    from agentunit_gym.core.env import AgentEnv
    from agentunit_gym.errors import BackendError

    task_id, replies = _oracle(*CASES[0])
    env = skyrl_gym.make("agentunit-db-v0", env_config={"backend": "sqlite"}, extras={"task_id": task_id})
    env.init([])
    closed: list[bool] = []
    monkeypatch.setattr(AgentEnv, "close", lambda self: closed.append(True))

    def dead(self: AgentEnv[Any], action: str) -> Any:
        raise BackendError("the database connection dropped")

    monkeypatch.setattr(AgentEnv, "step", dead)
    with pytest.raises(BackendError, match="connection dropped"):
        env.step(replies[0])
    assert closed == [True] and env.get_metrics() == {}  # freed; no reward, no score to log
    with pytest.raises(EpisodeStateError, match="after close"):
        env.step(replies[0])
    monkeypatch.undo()

    env = skyrl_gym.make("agentunit-db-v0", env_config={"backend": "sqlite"}, extras={"task_id": task_id})

    def unreachable(self: AgentEnv[Any], **kwargs: Any) -> Any:
        raise BackendError("the database server went away")

    monkeypatch.setattr(AgentEnv, "reset", unreachable)
    with pytest.raises(BackendError, match="went away"):
        env.init([])
    with pytest.raises(EpisodeStateError, match="after close"):
        env.init([])
