"""AgentUnit envs through verifiers' own API: load the env, run rollouts against a fake model.

The rollout runs verifiers' real machinery: its chat harness program (a uv script verifiers
prepares in a local subprocess runtime: it installs uv when missing, and the first run fetches
the script's packages from PyPI into uv's cache), its interception server, and the fake
OpenAI-compatible server of ``agentunit_gym.eval.agents.fake_server`` as the model, replying with
the oracle's replies.
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("verifiers")  # the integrations extra; installed by the test extra in CI

import verifiers.v1 as vf  # noqa: E402

import agentunit_gym  # noqa: E402,F401
import agentunit_gym.integrations.verifiers as verifiers_adapter  # noqa: E402
from agentunit_gym.core.chat import EXAMPLE_NOTE  # noqa: E402
from agentunit_gym.errors import ConfigError  # noqa: E402
from agentunit_gym.eval.agents.fake_server import FakeChatServer  # noqa: E402
from agentunit_gym.integrations.verifiers import (  # noqa: E402
    REWARD_NAME,
    TASKSET_ID,
    AgentUnitEnv,
    AgentUnitTaskset,
    load_environment,
)

ENV_ID, BACKEND = "AgentUnit/DB-v0", "sqlite"
ROLLOUT_DEADLINE_S = 240


def _task_and_replies(env_id: str = ENV_ID, backend: str = BACKEND) -> tuple[Any, list[str]]:
    env = gym.make(env_id, backend=backend)
    try:
        base: Any = env.unwrapped
        task = next(t for t in base.tasks if not any(s.from_output for s in t.reference_solution))
        return task, [str(base.render_action(step)) for step in task.reference_solution]
    finally:
        env.close()


def _rollout(env: AgentUnitEnv, task: Any, replies: list[str]) -> tuple[Any, FakeChatServer]:
    """One episode of ``task`` with a model that sends ``replies`` in order (the last one again if asked more)."""
    examples = sum(1 for m in task.data.prompt if getattr(m, "role", None) == "assistant")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant") - examples
        return {"role": "assistant", "content": replies[min(turn, len(replies) - 1)]}

    async def play(server: FakeChatServer) -> Any:
        ctx = vf.ModelContext(model="fake", client=vf.EvalClientConfig(
            base_url=server.base_url, api_key_var="AGENTUNIT_FAKE_API_KEY"))
        async with env.serving():
            return await asyncio.wait_for(env.run_episode(task, ctx), ROLLOUT_DEADLINE_S)

    with FakeChatServer(respond) as server:
        return asyncio.run(play(server)), server


def test_the_taskset_holds_every_task_with_the_evaluators_prompt() -> None:
    env = load_environment("DB-v0", backend=BACKEND)
    assert isinstance(env.taskset, AgentUnitTaskset) and env.config.env_id == TASKSET_ID
    tasks = list(env.taskset)
    reference, _ = _task_and_replies()
    assert len(tasks) == len({t.key for t in tasks}) > 10
    first = next(t for t in tasks if t.data.id == reference.id)
    assert first.key == f"{ENV_ID}:{reference.id}" and first.data.info["env_id"] == ENV_ID
    assert EXAMPLE_NOTE in first.data.system_prompt  # react style: the grammar is in the task's observation
    roles = [m.role for m in first.data.prompt]
    assert roles[-1] == "user" and "assistant" in roles  # the worked example, then the task
    assert reference.instruction.split()[0] in first.data.prompt[-1].content


def test_split_none_is_every_task_and_a_split_keeps_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make(ENV_ID, backend=BACKEND)
    base: Any = env.unwrapped
    bundled = base.tasks[:3]
    model = type(bundled[0])
    env.close()

    class SplitTask(model):  # type: ignore[misc,valid-type]  # the split field, whether the base has it yet or not
        split: str | None = None

    tasks = [SplitTask.model_validate({**t.model_dump(), "split": s})
             for t, s in zip(bundled, ["train", "test", "train"], strict=True)]
    # Task objects are not config data (verifiers dumps its configs), so hand them to the env directly.
    monkeypatch.setattr(verifiers_adapter, "make_agentunit_env",
                        lambda config: gym.make(ENV_ID, backend=BACKEND, tasks=tasks))
    train = list(load_environment(ENV_ID, "train", backend=BACKEND).taskset)
    assert [t.data.id for t in train] == [tasks[0].id, tasks[2].id]
    assert {t.data.info["split"] for t in train} == {"train"}
    assert len(list(load_environment(ENV_ID, None, backend=BACKEND).taskset)) == 3
    monkeypatch.undo()
    assert list(load_environment(ENV_ID, "no-such-split", backend=BACKEND).taskset) == []


def test_unknown_env_id_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown AgentUnit env id"):
        load_environment("Nope-v0")


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "backend", "correct"), [(ENV_ID, BACKEND, True), (ENV_ID, BACKEND, False),
                                                            ("AgentUnit/KG-v0", "embedded", True)],
                         ids=["db-oracle", "db-wrong-answer", "kg-oracle"])
def test_a_rollout_with_a_fake_model_is_scored_by_the_env(env_id: str, backend: str, correct: bool) -> None:
    reference, replies = _task_and_replies(env_id, backend)
    if not correct:
        replies = [*replies[:-1], 'Action: Answer\nFinal Answer: ["certainly not this"]']
    env = load_environment(env_id, backend=backend, player={"max_turns": 10})
    task = next(t for t in env.taskset if t.data.id == reference.id)
    episode, server = _rollout(env, task, replies)
    assert episode.errors == [] and len(episode.traces) == 1
    trace = episode.traces[0]
    assert trace.ok, trace.errors
    assert set(trace.rewards) == {REWARD_NAME}
    assert trace.reward == (1.0 if correct else 0.0)
    assert trace.metrics["success"] == (1.0 if correct else 0.0)
    assert trace.metrics["steps"] == len(replies) == len(server.requests)
    assert trace.info["agentunit"]["finish_reason"] == "complete"
    assert trace.info["agentunit"]["score"]["success"] is correct
    # The model saw the env's observation of its first action as the next user turn.
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": replies[0]} or second[-2]["content"] == replies[0]
    assert second[-1]["role"] == "user" and second[-1]["content"]


@pytest.mark.slow
def test_an_agent_run_that_ends_first_ends_the_episode_as_task_limit() -> None:
    reference, replies = _task_and_replies()
    assert len(replies) >= 2
    env = load_environment(ENV_ID, backend=BACKEND, player={"max_turns": 1})  # one model turn, no commit
    task = next(t for t in env.taskset if t.data.id == reference.id)
    episode, server = _rollout(env, task, replies)
    trace = episode.traces[0]
    assert len(server.requests) == 1 and trace.metrics["steps"] == 1.0
    assert trace.reward == 0.0 and trace.info["agentunit"]["finish_reason"] == "task_limit"
    assert env.config.timeout.episode == verifiers_adapter.EPISODE_DEADLINE_S
