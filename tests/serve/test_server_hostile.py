"""The env server under hostile clients: wrong tokens, garbage, huge actions, floods, drops.

Each case is asserted by its status code (or WebSocket error code) and its message, and
after each the server still serves: a full episode on another session works.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

from websockets.exceptions import InvalidStatus  # noqa: E402
from websockets.sync.client import ClientConnection, connect  # noqa: E402

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.errors import (  # noqa: E402
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
    RemoteProtocolError,
    ServerBusyError,
)
from agentunit_gym.serve.openenv_api import installed_distributions  # noqa: E402
from agentunit_gym.serve.server import RunningServer, ServeConfig, start_server  # noqa: E402
from tests.serve.helpers import http, poll  # noqa: E402

MAX_SESSIONS = 3
TOKEN = "s3cret-token-for-tests"
SELECT = "Action: Operation\n```sql\nSELECT 1\n```"


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    # No queue: a request over the cap is refused at once (tests/serve/test_queue.py: the queue).
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, max_sessions=MAX_SESSIONS, warm=1,
                                  queue_timeout_s=0)) as s:
        yield s


@pytest.fixture(scope="module")
def guarded() -> Iterator[RunningServer]:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, max_sessions=2, warm=0, token=TOKEN)) as s:
        yield s


def ws(server: RunningServer, token: str | None = None) -> ClientConnection:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(server.url.replace("http://", "ws://") + "/ws", additional_headers=headers, open_timeout=10,
                   max_size=None)


def ask(conn: ClientConnection, message: str | dict[str, Any]) -> dict[str, Any]:
    conn.send(message if isinstance(message, str) else json.dumps(message))
    answer: dict[str, Any] = json.loads(conn.recv(timeout=30))
    return answer


def open_sessions(server: RunningServer) -> int:
    status, body = http("GET", server.url + "/health")
    assert status == 200
    return int(body["sessions"]["open"])


def assert_still_serving(server: RunningServer) -> None:
    """A new session plays a step, and /health answers."""
    with gym.make("AgentUnit/Remote-v0", url=server.url) as env:
        env.reset(seed=1)
        observation, _, _, _, info = env.step(SELECT)
    assert observation == "[(1,)]" and info["execution_error"] is False


# ----------------------------------------------------------------- metadata


def test_health_and_metadata_name_the_env_backend_and_tasks(server: RunningServer) -> None:
    with gym.make("AgentUnit/DB-v0", backend="sqlite") as local:
        tasks = len(local.unwrapped.tasks)  # type: ignore[attr-defined]
    status, health = http("GET", server.url + "/health")
    assert status == 200 and health["status"] == "healthy"
    assert (health["env_id"], health["backend"], health["tasks"]) == ("AgentUnit/DB-v0", "sqlite", tasks)
    assert sum(health["splits"].values()) == tasks
    assert health["sessions"]["max"] == MAX_SESSIONS
    status, meta = http("GET", server.url + "/metadata")
    assert status == 200
    assert (meta["name"], meta["env_id"], meta["backend"], meta["tasks"]) == ("AgentUnit/DB-v0", "AgentUnit/DB-v0",
                                                                            "sqlite", tasks)
    assert meta["splits"] == health["splits"] and meta["auth"] == "none"
    installed = installed_distributions()  # which OpenEnv runs: openenv-core 0.3 or openenv 0.10 here
    assert meta["openenv"] == " and ".join(f"{name} {version}" for name, version in installed.items())
    status, schema = http("GET", server.url + "/schema")
    assert status == 200 and "text" in schema["action"]["properties"]


# ---------------------------------------------------------------- bad input


def test_garbage_json_gets_422_over_http_and_an_error_message_over_websocket(server: RunningServer) -> None:
    status, body = http("POST", server.url + "/step", b"{this is not json")
    assert status == 422
    assert "json" in json.dumps(body).lower()
    with ws(server) as conn:
        answer = ask(conn, "{this is not json")
        assert answer["type"] == "error" and answer["data"]["code"] == "INVALID_JSON"
        assert "Invalid JSON" in answer["data"]["message"]
        # The session goes on after the garbage.
        assert ask(conn, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
    assert_still_serving(server)


def test_unknown_fields_get_422_and_name_the_field(server: RunningServer) -> None:
    status, body = http("POST", server.url + "/step", json.dumps({"action": {"text": "x", "bogus": 1}}).encode())
    assert status == 422
    assert "bogus" in json.dumps(body) and "extra" in json.dumps(body).lower()
    status, body = http("POST", server.url + "/step", json.dumps({"action": {"text": "x"}, "bogus": 1}).encode())
    assert status == 422
    assert body["error"] == "RemoteProtocolError" and "['bogus']" in body["detail"]
    status, body = http("POST", server.url + "/reset", json.dumps({"seed": 0, "colour": "red"}).encode())
    assert status == 422
    assert body["error"] == "RemoteProtocolError" and "colour" in body["detail"]
    with ws(server) as conn:
        answer = ask(conn, {"type": "step", "data": {"text": "x", "bogus": 1}})
        assert answer["data"]["code"] == "VALIDATION_ERROR" and "bogus" in json.dumps(answer["data"]["errors"])
        answer = ask(conn, {"type": "reset", "data": {"seed": 0, "colour": "red"}})
        assert answer["data"]["code"] == "EXECUTION_ERROR"
        assert answer["data"]["message"].startswith("RemoteProtocolError: unknown reset field(s) ['colour']")
        answer = ask(conn, {"type": "dance"})
        assert answer["data"]["code"] == "UNKNOWN_TYPE" and "dance" in answer["data"]["message"]
    assert_still_serving(server)


def test_a_10mb_action_gets_413_and_the_session_survives(server: RunningServer) -> None:
    huge = "A" * (10 << 20)
    status, body = http("POST", server.url + "/step", json.dumps({"action": {"text": huge}}).encode())
    assert status == 413
    assert body["code"] == "REQUEST_TOO_LARGE" and "over this server's limit of 1048576 bytes" in body["detail"]
    with ws(server) as conn:
        assert ask(conn, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        answer = ask(conn, {"type": "step", "data": {"text": huge}})
        assert answer["type"] == "error" and answer["data"]["code"] == "MESSAGE_TOO_LARGE"
        assert "over this server's limit" in answer["data"]["message"]
        step = ask(conn, {"type": "step", "data": {"text": SELECT}})
        assert step["type"] == "observation" and step["data"]["observation"]["text"] == "[(1,)]"
    # Under the byte limit but over the character limit: 422 from the session.
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0, max_action_chars=100)) as small:
        with gym.make("AgentUnit/Remote-v0", url=small.url) as env:
            env.reset(seed=0)
            with pytest.raises(RemoteProtocolError, match="over this server's limit of 100"):
                env.step("B" * 1000)
            assert env.step(SELECT)[0] == "[(1,)]"
    assert_still_serving(server)


def test_step_without_a_session_is_409_over_stateless_http(server: RunningServer) -> None:
    status, body = http("POST", server.url + "/step", json.dumps({"action": {"text": SELECT}}).encode())
    assert status == 409
    assert body["error"] == "EpisodeStateError" and "reset" in body["detail"]


def test_an_unknown_task_is_404(server: RunningServer) -> None:
    status, body = http("POST", server.url + "/reset", json.dumps({"options": {"task_id": "nope"}}).encode())
    assert status == 404 and "nope" in body["detail"]


# -------------------------------------------------------------- flood, drops


def test_a_session_flood_gets_503_with_the_reason(server: RunningServer) -> None:
    poll(lambda: open_sessions(server) == 0, 10, "earlier sessions to close")
    envs = [gym.make("AgentUnit/Remote-v0", url=server.url) for _ in range(MAX_SESSIONS)]
    try:
        for env in envs:
            env.reset(seed=0)
        with pytest.raises(InvalidStatus) as refused:
            ws(server)
        assert refused.value.response.status_code == 503
        body = json.loads(refused.value.response.body)
        assert body["code"] == "CAPACITY_REACHED" and "--max-sessions 3" in body["detail"]
        with pytest.raises(ServerBusyError, match="503.*--max-sessions 3"):
            gym.make("AgentUnit/Remote-v0", url=server.url)
        status, body = http("POST", server.url + "/reset", b"{}")  # OpenEnv's stateless HTTP reset
        assert status == 503
        assert body["error"] == "ServerBusyError" and "--max-sessions 3" in body["detail"]
        # The sessions that were admitted go on playing.
        assert all(env.step(SELECT)[0] == "[(1,)]" for env in envs)
    finally:
        for env in envs:
            env.close()
    poll(lambda: open_sessions(server) == 0, 10, "the flood's sessions to close")
    assert_still_serving(server)


def test_a_client_that_drops_mid_episode_loses_only_its_session(server: RunningServer) -> None:
    poll(lambda: open_sessions(server) == 0, 10, "earlier sessions to close")
    with gym.make("AgentUnit/Remote-v0", url=server.url) as survivor:
        survivor.reset(seed=3)
        conn = ws(server).__enter__()
        assert ask(conn, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        assert ask(conn, {"type": "step", "data": {"text": SELECT}})["type"] == "observation"
        assert open_sessions(server) == 2
        conn.socket.close()  # no close frame: the process died, or the network dropped
        poll(lambda: open_sessions(server) == 1, 10, "the dropped session to be freed")
        assert server.server.pool.leased == 1
        observation, _, _, _, info = survivor.step(SELECT)
        assert observation == "[(1,)]" and info["step"] == 1


def test_sessions_do_not_see_each_others_state(server: RunningServer) -> None:
    create = "Action: Operation\n```sql\nCREATE TABLE secret_of_a (x INTEGER)\n```"
    look = "Action: Operation\n```sql\nSELECT name FROM sqlite_master WHERE name = 'secret_of_a'\n```"
    with gym.make("AgentUnit/Remote-v0", url=server.url) as a, gym.make("AgentUnit/Remote-v0", url=server.url) as b:
        a.reset(seed=0)
        b.reset(seed=0)
        assert a.step(create)[4]["execution_error"] is False
        assert a.step(look)[0] == "[('secret_of_a',)]"
        assert b.step(look)[0] == "[]"
        # A later session on the same server starts pristine too.
    with gym.make("AgentUnit/Remote-v0", url=server.url) as c:
        c.reset(seed=0)
        assert c.step(look)[0] == "[]"


def test_an_idle_session_is_reaped_and_its_env_closed() -> None:
    config = ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0, idle_timeout_s=0.2)
    with start_server(config) as running:
        env = gym.make("AgentUnit/Remote-v0", url=running.url)
        env.reset(seed=0)
        assert running.server.pool.leased == 1
        # OpenEnv's reaper looks every max(timeout / 4, 5 s).
        poll(lambda: running.server.pool.leased == 0 and open_sessions(running) == 0, 20, "the idle session's reaping")
        with pytest.raises(EpisodeStateError, match="idle past the server's --idle-timeout"):
            env.step(SELECT)
        env.close()
        assert_still_serving(running)


# ------------------------------------------------------------------ security


def test_a_wrong_or_missing_token_gets_401(guarded: RunningServer) -> None:
    for token in (None, "wrong"):
        # GET /health is a readiness probe (OpenEnv's Docker provider sends no token): it says the
        # server listens, and nothing of what it serves.
        assert http("GET", guarded.url + "/health", token=token) == (200, {"status": "healthy"})
        assert http("HEAD", guarded.url + "/health", token=token) == (200, "")  # probes that send HEAD
        status, body = http("GET", guarded.url + "/metadata", token=token)
        assert status == 401 and body["code"] == "UNAUTHORIZED"
        assert "Authorization: Bearer <token>" in body["detail"]
        assert ("a wrong token" if token else "no Authorization header") in body["detail"]
        status, _ = http("POST", guarded.url + "/reset", b"{}", token=token)
        assert status == 401
        with pytest.raises(InvalidStatus) as refused:
            ws(guarded, token)
        assert refused.value.response.status_code == 401
        with pytest.raises(BackendUnavailableError, match="401"):
            gym.make("AgentUnit/Remote-v0", url=guarded.url, token=token or "")
    status, health = http("GET", guarded.url + "/health", token=TOKEN)
    assert status == 200 and health["env_id"] == "AgentUnit/DB-v0"
    with gym.make("AgentUnit/Remote-v0", url=guarded.url, token=TOKEN) as env:
        env.reset(seed=0)
        assert env.step(SELECT)[0] == "[(1,)]"


def test_binding_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="needs a token"):
        start_server(ServeConfig(env="DB-v0", backend="sqlite", host="0.0.0.0", port=0))
    with pytest.raises(ConfigError, match="empty"):
        start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, token="  "))
    with pytest.raises(ConfigError, match="unknown env"):
        start_server(ServeConfig(env="Nope-v0", port=0))
