"""``AgentUnit/Remote-v0`` plays the same episodes as the local env; OpenEnv's own client works too."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.core.env import StepTiming  # noqa: E402
from agentunit_gym.core.finish import FinishReason  # noqa: E402
from agentunit_gym.errors import (  # noqa: E402
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
    TaskNotFoundError,
)
from agentunit_gym.serve.jsonsafe import to_jsonable  # noqa: E402
from agentunit_gym.serve.remote import RemoteEnv, restore_info, websocket_url  # noqa: E402
from agentunit_gym.serve.server import RunningServer, ServeConfig, start_server  # noqa: E402
from tests.serve.helpers import oracle_replies, play  # noqa: E402

CASES = {"DB-v0": "sqlite", "KG-v0": "embedded"}


@pytest.fixture(scope="module", params=sorted(CASES))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, RunningServer]]:
    env_id = request.param
    with start_server(ServeConfig(env=env_id, backend=CASES[env_id], port=0, warm=1)) as running:
        yield env_id, running


MEASUREMENTS = {"timing", "duration_s"}
"""Keys that hold wall-clock measurements, which differ between any two runs."""


def comparable(value: object) -> object:
    """``info`` as JSON without its measurements: what must be equal on both sides."""
    data = to_jsonable(value)
    if isinstance(data, dict):
        return {k: comparable(v) for k, v in data.items() if k not in MEASUREMENTS}
    if isinstance(data, list):
        return [comparable(v) for v in data]
    return data


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("agent", ["oracle", "wrong"])
def test_a_seeded_episode_is_the_same_locally_and_remotely(served: tuple[str, RunningServer], seed: int,
                                                           agent: str) -> None:
    env_id, running = served
    with gym.make(f"AgentUnit/{env_id}", backend=CASES[env_id]) as local:
        local.reset(seed=seed)
        replies = oracle_replies(local) if agent == "oracle" else ["not an action", "Action: nonsense"] * 20
        here = play(local, replies, seed)
    with gym.make("AgentUnit/Remote-v0", url=running.url) as remote:
        there = play(remote, replies, seed)
    assert len(here) == len(there) > 1
    for (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) in zip(here, there, strict=True):
        assert (o1, r1, te1, tr1) == (o2, r2, te2, tr2)
        assert comparable(i1) == comparable(i2)
    final_local, final_remote = here[-1][4], there[-1][4]
    assert final_remote["score"] == final_local["score"]
    assert isinstance(final_remote["finish_reason"], FinishReason)
    assert final_remote["finish_reason"] is final_local["finish_reason"]
    assert final_remote["timing"].env_s >= 0
    if agent == "oracle":
        assert final_remote["score"]["success"] is True and here[-1][1] == there[-1][1] > 0


def test_task_options_and_errors_travel_as_the_local_types(served: tuple[str, RunningServer]) -> None:
    env_id, running = served
    with gym.make(f"AgentUnit/{env_id}", backend=CASES[env_id]) as local:
        task = local.unwrapped.tasks[-1]  # type: ignore[attr-defined]
        task_id = task.id
    with gym.make("AgentUnit/Remote-v0", url=running.url) as remote:
        with pytest.raises(EpisodeStateError, match="before reset"):  # the server's check, past gym's own
            remote.unwrapped.step("hello")
        _, info = remote.reset(options={"task_id": task_id})
        assert info["task_id"] == task_id
        with pytest.raises(TaskNotFoundError, match="no-such-task"):
            remote.reset(options={"task_id": "no-such-task"})
        # A task spec travels as its fields (the server validates it with the env's task model).
        _, info = remote.reset(options={"task": task})
        assert info["task_id"] == task.id and info["instruction"] == task.instruction
    with pytest.raises(EpisodeStateError, match="after close"):
        remote.step("hello")


def test_openenv_own_client_plays_a_session(served: tuple[str, RunningServer]) -> None:
    from openenv.core.generic_client import GenericEnvClient

    env_id, running = served
    with GenericEnvClient(base_url=running.url).sync() as client:
        result = client.reset(seed=0)
        assert result.done is False and result.observation["info"]["domain"] == env_id.split("-")[0].lower()
        result = client.step({"text": "not an action"})
        assert result.done is False and result.reward == 0.0
        assert result.observation["info"]["action_error"]["reason"] == "invalid_format"
        state = client.state()
        assert state["step_count"] == 1 and state["env_id"] == f"AgentUnit/{env_id}"


def test_check_env_passes_on_the_remote_env(served: tuple[str, RunningServer]) -> None:
    from gymnasium.utils.env_checker import check_env

    _, running = served
    with gym.make("AgentUnit/Remote-v0", url=running.url) as env:
        check_env(env.unwrapped, skip_render_check=True)


def test_an_unreachable_server_raises_backend_unavailable_quickly() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=f"cannot reach the env server at http://127.0.0.1:{port}.*"
                                                      "agentunit-gym serve"):
        gym.make("AgentUnit/Remote-v0", url=f"http://127.0.0.1:{port}", connect_timeout_s=5)
    assert time.monotonic() - started < 5


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as listener:  # accepts the TCP connection, never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(BackendUnavailableError, match="no answer .* within 1 s"):
            RemoteEnv(f"http://127.0.0.1:{port}", connect_timeout_s=1)


def test_urls_and_options_are_checked() -> None:
    assert websocket_url("http://h:1") == "ws://h:1/ws"
    assert websocket_url("https://h:1/") == "wss://h:1/ws"
    assert websocket_url("ws://h:1/ws") == "ws://h:1/ws"
    with pytest.raises(ConfigError, match="must start with"):
        websocket_url("h:1")
    with pytest.raises(ConfigError, match="positive"):
        RemoteEnv("http://127.0.0.1:1", timeout_s=0)
    with pytest.raises(ConfigError, match="needs the server's URL"):
        gym.make("AgentUnit/Remote-v0")
    assert "AgentUnit/Remote-v0" in gym.registry


def test_restore_info_types_what_the_core_types_and_leaves_the_rest() -> None:
    sent = {"finish_reason": "complete", "timing": {"env_s": 0.5}, "action": None, "limit": "steps"}
    assert restore_info(sent) == {"finish_reason": FinishReason.COMPLETE, "timing": StepTiming(0.5),
                                  "action": None, "limit": "steps"}
    assert restore_info(sent)["timing"].env_s == 0.5
    # A vector-safe info may send a placeholder while the episode runs: it stays as sent.
    assert restore_info({"finish_reason": ""}) == {"finish_reason": ""}
    assert restore_info({"finish_reason": None, "timing": None}) == {"finish_reason": None, "timing": None}
