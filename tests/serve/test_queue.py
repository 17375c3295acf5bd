"""A full env server queues a session request up to ``queue_timeout_s`` before it refuses it
(issue 36, item 7): a burst of rollout workers twice the session cap all get their episode."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="the env server needs agentunit-gym[serve]")

import agentunit_gym  # noqa: E402,F401 - registers the ids
from agentunit_gym.errors import ServerBusyError  # noqa: E402
from agentunit_gym.serve.server import RunningServer, ServeConfig, start_server  # noqa: E402
from tests.serve.helpers import http, poll  # noqa: E402

SELECT = "Action: Operation\n```sql\nSELECT 1;\n```"
CAP = 2


def _health(server: RunningServer) -> dict[str, int]:
    status, body = http("GET", server.url + "/health")
    assert status == 200
    return dict(body["sessions"])


@pytest.fixture(scope="module")
def queued() -> Iterator[RunningServer]:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, max_sessions=CAP, warm=1,
                                  queue_timeout_s=120)) as s:
        yield s


def test_a_burst_of_twice_the_cap_all_play_their_episode(queued: RunningServer) -> None:
    poll(lambda: _health(queued)["open"] == 0, 10, "earlier sessions to close")
    holders = [gym.make("AgentUnit/Remote-v0", url=queued.url) for _ in range(CAP)]
    for env in holders:
        env.reset(seed=0)
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            # The client waits as long as the server queues (its own default is 10 s).
            with gym.make("AgentUnit/Remote-v0", url=queued.url, connect_timeout_s=120) as env:
                env.reset(seed=index)
                results[index] = env.step(SELECT)[0]
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    burst = [threading.Thread(target=worker, args=(i,)) for i in range(CAP)]
    for thread in burst:
        thread.start()
    try:
        # Both wait in the queue while the cap's sessions are open: none of them has played.
        poll(lambda: _health(queued)["queued"] == CAP, 30, "the burst to queue")
        assert results == {} and errors == []
        assert _health(queued)["open"] == CAP
        holders.pop().close()  # one place frees: one queued worker gets it and plays
        poll(lambda: len(results) >= 1, 60, "a queued worker to play")
        holders.pop().close()
        for thread in burst:
            thread.join(timeout=60)
        assert errors == [], errors
        assert results == {i: "[(1,)]" for i in range(CAP)}
        poll(lambda: _health(queued)["queued"] == 0, 10, "the queue to empty")
    finally:
        for env in holders:
            env.close()
    poll(lambda: _health(queued)["open"] == 0, 10, "the burst's sessions to close")


def test_a_request_that_waits_out_the_queue_gets_503_with_retry_after() -> None:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, max_sessions=1, warm=0,
                                  queue_timeout_s=0.5)) as server:
        with gym.make("AgentUnit/Remote-v0", url=server.url) as holder:
            holder.reset(seed=0)
            with pytest.raises(ServerBusyError, match=r"503.*waited 0.5 s"):
                gym.make("AgentUnit/Remote-v0", url=server.url).reset(seed=1)
            # OpenEnv's stateless HTTP reset waits for the pool the same way, then says so.
            request = urllib.request.Request(server.url + "/reset", data=b"{}", method="POST",
                                             headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 503 and refused.value.headers["Retry-After"] == "1"
            body = json.loads(refused.value.read())
            assert body["error"] == "ServerBusyError" and "waited 0.5 s" in body["detail"]
            assert holder.step(SELECT)[0] == "[(1,)]"  # the admitted session plays on


def test_without_a_queue_the_refusal_is_at_once_and_says_when_to_retry() -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, max_sessions=1, warm=0,
                                  queue_timeout_s=0)) as server:
        with gym.make("AgentUnit/Remote-v0", url=server.url) as holder:
            holder.reset(seed=0)
            with pytest.raises(InvalidStatus) as refused:
                connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=10)
            response = refused.value.response
            assert response.status_code == 503 and response.headers["Retry-After"] == "1"
            assert "waited" not in json.loads(response.body)["detail"]
