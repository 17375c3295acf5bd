"""``agentunit-gym serve`` as a user runs it: it says where it listens, serves, and stops on Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

import agentunit_gym  # noqa: E402,F401
from tests.cli.clitools import cli, default_sigint  # noqa: E402
from tests.serve.helpers import http  # noqa: E402


def test_serve_prints_its_url_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTUNIT_GYM_TOKEN": "tok-from-the-environment"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen([sys.executable, "-m", "agentunit_gym", "serve", "--env", "DB-v0", "--backend", "sqlite",
                             "--port", "0", "--max-sessions", "2", "--warm", "0"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    try:
        ready = lines.get(timeout=90)
        found = re.search(r"on (http://127\.0\.0\.1:\d+) \(max 2 sessions, bearer token required\)", ready)
        assert found, ready
        url = found.group(1)
        assert http("GET", url + "/health") == (200, {"status": "healthy"})  # a readiness probe: nothing more
        assert http("GET", url + "/metadata")[0] == 401
        status, health = http("GET", url + "/health", token="tok-from-the-environment")
        assert status == 200 and health["backend"] == "sqlite"
        with gym.make("AgentUnit/Remote-v0", url=url, token="tok-from-the-environment") as remote:
            remote.reset(seed=0)
            assert remote.step("Action: Operation\n```sql\nSELECT 2\n```")[0] == "[(2,)]"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_refuses_to_expose_without_a_token(tmp_path: Path) -> None:
    result = cli("serve", "--env", "DB-v0", "--backend", "sqlite", "--host", "0.0.0.0", "--port", "0", cwd=tmp_path,
                 env={"AGENTUNIT_GYM_TOKEN": ""})
    assert result.returncode == 2
    assert "needs a token" in result.stderr and "--token" in result.stderr
    result = cli("serve", "--env", "DB-v0", "--env-kwargs", "[1]", cwd=tmp_path)
    assert result.returncode == 2 and "JSON object" in result.stderr
