"""Failures through the verifiers adapter are errors a trainer masks, never a reward of 0.

Each rollout runs verifiers' real machinery (its chat program, its interception server) against
the fake OpenAI-compatible server of ``agentunit_gym.eval.agents.fake_server``, on a machine where the
network is cut for the chat program (dead proxies, no ``uv`` on ``PATH``): the adapter's harness
must need neither.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import Any

import pytest

pytest.importorskip("verifiers")  # the integrations extra; installed by the test extra in CI

import verifiers.v1 as vf  # noqa: E402

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.core.env import AgentEnv  # noqa: E402
from agentunit_gym.errors import BackendError  # noqa: E402
from agentunit_gym.eval.agents.fake_server import FakeChatServer  # noqa: E402
from agentunit_gym.integrations.verifiers import REWARD_NAME, load_environment  # noqa: E402

pytestmark = pytest.mark.slow

ENV_ID, BACKEND = "AgentUnit/DB-v0", "sqlite"
ROLLOUT_DEADLINE_S = 240
QUERY = "Action: Operation\n```sql\nSELECT 1\n```"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Every outside address unreachable for the chat program (loopback stays), and no uv to run
    (none on ``PATH``, and a home without the ``~/.local/bin`` verifiers installs it to)."""
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens there
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not os.path.exists(os.path.join(d, "uv"))]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    assert shutil.which("uv") is None


def _rollout(server: FakeChatServer, *, read_timeout_s: float | None = None, rollout_budget_s: float | None = None,
             break_backend: bool = False, monkeypatch: pytest.MonkeyPatch | None = None) -> Any:
    player: dict[str, Any] = {"max_turns": 10}
    if rollout_budget_s is not None:
        player["timeout"] = {"rollout": rollout_budget_s}
    env = load_environment("DB-v0", backend=BACKEND, player=player)
    task = next(iter(env.taskset))
    if break_backend:
        assert monkeypatch is not None

        def dead(self: AgentEnv[Any], action: str) -> Any:
            raise BackendError("the database connection dropped")

        monkeypatch.setattr(AgentEnv, "step", dead)
    timeout = {"read": read_timeout_s} if read_timeout_s is not None else {}
    ctx = vf.ModelContext(model="fake", client=vf.EvalClientConfig(
        base_url=server.base_url, api_key_var="AGENTUNIT_FAKE_API_KEY", timeout=timeout))

    async def play() -> Any:
        async with env.serving():
            return await asyncio.wait_for(env.run_episode(task, ctx), ROLLOUT_DEADLINE_S)

    return asyncio.run(play())


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": QUERY}


def _assert_masked(episode: Any, *, status: int | None) -> Any:
    """The episode and its trace are failed, the reward is not a score, the finish is an error."""
    assert episode.ok is False and len(episode.traces) == 1
    trace = episode.traces[0]
    assert trace.ok is False and trace.errors, "the failure must be on the trace"
    assert trace.rewards.get(REWARD_NAME) is None  # not scored: no 0.0 to train on
    assert trace.info["agentunit"]["finish_reason"] == "error"
    assert trace.info["agentunit"]["score"] is None
    if status is not None:
        assert trace.errors[-1].status_code == status
    return trace


@pytest.mark.parametrize("status", [400, 500])
def test_a_model_server_error_is_an_error_on_the_trace(status: int) -> None:
    with FakeChatServer(_answer, failures=[status] * 10) as server:
        episode = _rollout(server)
    assert server.statuses and set(server.statuses) == {status}
    trace = _assert_masked(episode, status=status)
    assert trace.errors[-1].type == "ProviderError" and trace.stop_condition == "provider_error"
    assert f"HTTP {status}" in trace.info["agentunit"]["error"]


def test_a_model_server_that_does_not_answer_in_time_is_an_error() -> None:
    with FakeChatServer(_answer, latency_s=30.0) as server:  # answers long after the client's read deadline
        episode = _rollout(server, read_timeout_s=1.0)
    _assert_masked(episode, status=504)


def test_a_time_budget_spent_waiting_for_the_model_is_an_error() -> None:
    # No read deadline: the agent's time budget (verifiers' rollout timeout) runs out first.
    with FakeChatServer(_answer, latency_s=30.0) as server:
        episode = _rollout(server, rollout_budget_s=2.0)
    trace = _assert_masked(episode, status=None)
    assert trace.is_timeout and "time budget ran out" in trace.info["agentunit"]["error"]
    assert trace.errors[-1].type == "ModelAPIError"


def test_a_context_overflow_is_the_agents_end_and_scored() -> None:
    # The first answer runs an SQL query; the second request overflows the model's context.
    with FakeChatServer(_answer, context_limit_after=1) as server:
        episode = _rollout(server)
    trace = episode.traces[0]
    assert trace.ok is True and episode.ok is True
    assert trace.info["agentunit"]["finish_reason"] == "context_limit"
    assert trace.rewards[REWARD_NAME] is not None and trace.reward == 0.0


def test_a_backend_failure_fails_the_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeChatServer(_answer) as server:
        episode = _rollout(server, break_backend=True, monkeypatch=monkeypatch)
    trace = _assert_masked(episode, status=None)
    assert trace.errors[-1].type == "BackendError" and "connection dropped" in trace.errors[-1].message
    assert episode.errors and "BackendError" in episode.errors[-1].message


def test_a_healthy_rollout_needs_no_network_and_is_scored() -> None:
    with FakeChatServer(_answer) as server:
        episode = _rollout(server)
    trace = episode.traces[0]
    assert episode.ok is True and trace.ok is True, trace.errors
    assert trace.rewards[REWARD_NAME] is not None  # scored (the agent never answered: 0, a real score)
    assert trace.info["agentunit"]["finish_reason"] == "task_limit" and len(server.requests) == 10
