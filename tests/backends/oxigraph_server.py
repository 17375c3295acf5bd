"""Oxigraph's SPARQL server (PyPI's ``oxigraph`` binary) on a loopback port, over an existing store.

A real HTTP SPARQL 1.1 endpoint without Docker, for the conformance suite and the benchmark.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from agentunit_gym.backends.sparql.container import oxigraph_binary
from agentunit_gym.errors import BackendUnavailableError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OxigraphServer:
    """``oxigraph serve-read-only`` on ``store`` (a folder made by ``build_store``)."""

    def __init__(self, store: Path, *, timeout_s: int = 30, ready_timeout: float = 30.0) -> None:
        port = _free_port()
        self.endpoint = f"http://127.0.0.1:{port}/query"
        self.process = subprocess.Popen(
            [str(oxigraph_binary()), "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{port}",
             "--timeout-s", str(timeout_s)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
                raise BackendUnavailableError(f"oxigraph exited at start: {err[-500:]}")
            try:
                with urllib.request.urlopen(self.endpoint + "?query=ASK%7B%7D", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)  # poll interval of a readiness wait with a deadline
        self.close()
        raise BackendUnavailableError(f"oxigraph did not answer within {ready_timeout:g} s")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()

    def __enter__(self) -> OxigraphServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":  # pragma: no cover - manual use: serve a store folder
    with OxigraphServer(Path(sys.argv[1])) as server:
        print(server.endpoint)
        server.process.wait()
