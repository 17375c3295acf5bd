"""The real small model for ``real_model`` tests: SmolLM2-135M-Instruct served by
llama-cpp-python from the venv ``scripts/real-model.sh`` builds (``serve``: the one place the
server's command line is written), behind a :class:`RecordingProxy` that captures every
request the model receives and every answer.

Policy: without the venv the tests are skipped (building it takes 15-25 min, once per
machine); with ``AGENTUNIT_REQUIRE_REAL_MODEL=1`` (scripts/test.sh sets it after building the
venv, so CI runs them) they fail instead. The server is started once per session on a free
loopback port, waited for within :data:`READY_DEADLINE_S`, and stopped (its process group)
at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentunit_gym.eval.agents.recording_proxy import RecordingProxy
from tests.conftest import REQUIRE_REAL_MODEL

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "real-model.sh"
READY_DEADLINE_S = 180.0
MODEL = "smollm2-135m"
"""The model under its own chat template (ChatML): the text protocols and the judge."""
FC_MODEL = "smollm2-135m-fc"
"""The same model under llama-cpp-python's chatml-function-calling format (scripts/real-model.sh)."""


@dataclass
class RealModel:
    proxy: RecordingProxy
    server_log: Path

    @property
    def base_url(self) -> str:
        return self.proxy.base_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealModel]:
    probe = subprocess.run(["bash", str(SCRIPT), "model-path"], capture_output=True, text=True, timeout=120,
                           check=False)
    if probe.returncode != 0:
        why = ("the real-model venv is not built: run `bash scripts/real-model.sh setup` (15-25 min, once per "
               f"machine). {probe.stderr.strip()[-300:]}")
        if REQUIRE_REAL_MODEL:
            pytest.fail(f"AGENTUNIT_REQUIRE_REAL_MODEL=1 but {why}")
        pytest.skip(f"{why} (AGENTUNIT_REQUIRE_REAL_MODEL=1 makes this a failure)")
    port = _free_port()
    log = tmp_path_factory.mktemp("real-model") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["bash", str(SCRIPT), "serve", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while not _answers(port):
            if proc.poll() is not None:
                pytest.fail(f"the model server exited ({proc.returncode}) before it answered: "
                            f"{log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the model server did not answer within {READY_DEADLINE_S:g} s: "
                            f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(1.0)
        # The proxy's deadline is above the tests' --request-timeout: the client's governs.
        with RecordingProxy(f"http://127.0.0.1:{port}", log=log.with_name("exchanges.jsonl"),
                            timeout_s=1500.0) as proxy:
            yield RealModel(proxy, log)
    finally:
        _stop(proc)
