"""The OS env behind the server: the local sandbox (no daemon), and Docker when a daemon answers.

The same seeded oracle episode is played in process and through the server, and a session's
files are gone for the next session (each session has its own sandbox, closed at its end).
"""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.serve.server import ServeConfig, start_server  # noqa: E402
from tests.serve.helpers import http, oracle_replies, play, poll  # noqa: E402

WRITE = "Think: leave a mark.\nAct: bash\n```bash\necho mark > /tmp/served_mark && cat /tmp/served_mark\n```"
READ = "Think: look for it.\nAct: bash\n```bash\ncat /tmp/served_mark 2>&1 || echo missing\n```"


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])])
def test_the_os_env_plays_through_the_server(backend: str) -> None:
    with gym.make("AgentUnit/OS-v0", backend=backend) as local:
        local.reset(seed=0)
        replies = oracle_replies(local)
        here = play(local, replies, seed=0)
    with start_server(ServeConfig(env="OS-v0", backend=backend, port=0, max_sessions=2, warm=1)) as running:
        status, health = http("GET", running.url + "/health")
        assert status == 200 and (health["env_id"], health["backend"]) == ("AgentUnit/OS-v0", backend)
        with gym.make("AgentUnit/Remote-v0", url=running.url) as remote:
            there = play(remote, replies, seed=0)
            assert [t[:4] for t in there] == [t[:4] for t in here]
            assert there[-1][4]["score"] == here[-1][4]["score"] and there[-1][4]["score"]["success"] is True
            remote.reset(seed=0)
            assert "mark" in remote.step(WRITE)[0]
        poll(lambda: running.server.pool.leased == 0, 30, "the first session's sandbox to be closed")
        with gym.make("AgentUnit/Remote-v0", url=running.url) as other:
            other.reset(seed=0)
            assert "missing" in other.step(READ)[0]
