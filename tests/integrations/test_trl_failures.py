"""docs/training.md's TRL environment class when the env server, its backend or the network fails.

The class needs no TRL to run (TRL only calls ``reset``, the tool methods and ``get_reward``), so
this runs everywhere: against a real env server (``AgentUnit/Remote-v0`` sessions), one whose
backend dies mid-episode, and an address where no server listens. A failure must give
``get_reward() is None`` (TRL's unscorable rollout, advantage 0), never 0.0.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv")  # the serve extra; installed by the test extra in CI

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.core.env import AgentEnv  # noqa: E402
from agentunit_gym.errors import BackendError, BackendUnavailableError  # noqa: E402
from agentunit_gym.serve.server import RunningServer, ServeConfig, start_server  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"
TASK_ID = "db-weather-03"
QUERY = "SELECT MIN(temp_min) FROM seattle_weather"


def _docs_class(url: str) -> type:
    section = DOCS.read_text(encoding="utf-8").split("### TRL\n", 1)[1]
    code = re.search(r"```python\n(.*?)```\n", section, re.DOTALL)
    assert code is not None
    scope: dict[str, Any] = {}
    exec(compile(code.group(1), "docs/training.md", "exec"), scope)
    scope["SERVER"] = url  # make_env reads the global at call time
    return scope["AgentUnitDB"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def served() -> Iterator[RunningServer]:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0)) as running:
        yield running


def test_a_backend_that_dies_mid_episode_is_no_reward_and_the_next_reset_recovers(
        served: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    instance = _docs_class(served.url)()
    try:
        assert instance.reset(task_id=TASK_ID)
        assert instance.execute_sql(query=QUERY) == "[(-3.2,)]"

        def dead(self: AgentEnv[Any], action: str) -> Any:
            raise BackendError("the database connection dropped")

        monkeypatch.setattr(AgentEnv, "step", dead)  # the server's env runs in this process
        with pytest.raises(BackendError, match="connection dropped"):  # relayed by the server, typed
            instance.execute_sql(query=QUERY)
        assert instance.get_reward() is None and instance.env is None  # not 0.0; the lost session closed
        with pytest.raises(ValueError, match="environment failed"):
            instance.submit_answer(answer=["-3.2"])
        assert instance.get_reward() is None
        monkeypatch.undo()

        assert instance.reset(task_id=TASK_ID)  # a new session
        instance.submit_answer(answer=["-3.2"])
        assert instance.done is True and instance.get_reward() == 1.0
    finally:
        if instance.env is not None:
            instance.env.close()


def test_an_unreachable_server_is_no_reward() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    instance = _docs_class(f"http://127.0.0.1:{port}")()
    assert instance.reset(task_id=TASK_ID) is None
    assert instance.get_reward() is None and "cannot reach the env server" in str(instance.failure)
    with pytest.raises(ValueError, match="environment failed"):
        instance.execute_sql(query=QUERY)


def test_a_wrong_answer_is_still_a_zero(served: RunningServer) -> None:
    instance = _docs_class(served.url)()
    try:
        instance.reset(task_id=TASK_ID)
        instance.submit_answer(answer=["certainly not this"])
        assert instance.get_reward() == 0.0 and instance.failure is None
    finally:
        instance.env.close()


def test_the_remote_env_itself_raises_typed_when_the_served_backend_dies(
        served: RunningServer, monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make("AgentUnit/Remote-v0", url=served.url)
    try:
        env.reset(options={"task_id": TASK_ID})

        def dead(self: AgentEnv[Any], action: str) -> Any:
            raise BackendError("the database connection dropped")

        monkeypatch.setattr(AgentEnv, "step", dead)
        with pytest.raises(BackendError, match="connection dropped"):
            env.step(f"Action: Operation\n```sql\n{QUERY}\n```")
    finally:
        env.close()


@pytest.mark.slow
def test_a_server_that_stops_mid_episode_is_no_reward() -> None:
    running = start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0))
    instance = _docs_class(running.url)()
    try:
        assert instance.reset(task_id=TASK_ID)
        running.stop()  # the server goes away with the session open
        with pytest.raises((BackendError, BackendUnavailableError)):
            instance.execute_sql(query=QUERY)
        assert instance.get_reward() is None and instance.env is None
    finally:
        running.stop()
        if instance.env is not None:
            instance.env.close()
