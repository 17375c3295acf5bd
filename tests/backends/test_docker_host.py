"""The Docker backend follows ``DOCKER_HOST`` to a daemon it reaches over TCP, as it would a
remote one: here the local daemon behind a loopback TCP proxy of the test's own, which
counts what it carries, so the test can tell the traffic went through it."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from types import TracebackType

import pytest

from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.records import read_records

pytestmark = pytest.mark.docker


def daemon_socket() -> str:
    """The local daemon's unix socket (from a ``unix://`` DOCKER_HOST, else the default)."""
    host = os.environ.get("DOCKER_HOST", "")
    return host[len("unix://"):] if host.startswith("unix://") else "/var/run/docker.sock"


class LoopbackDockerProxy:
    """Accepts TCP connections on 127.0.0.1 (a free port) and pipes each to the daemon's unix
    socket, both ways, counting connections and bytes."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = int(self.listener.getsockname()[1])
        self.connections = 0
        self.bytes_to_daemon = 0
        self.bytes_from_daemon = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> LoopbackDockerProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self.listener.close()
        for thread in list(self._threads):
            thread.join(timeout=5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            daemon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            daemon.connect(self.target)
            with self._lock:
                self.connections += 1
            self._spawn(self._pipe, client, daemon, True)
            self._spawn(self._pipe, daemon, client, False)

    def _pipe(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
                with self._lock:
                    if upstream:
                        self.bytes_to_daemon += len(data)
                    else:
                        self.bytes_from_daemon += len(data)
        except OSError:
            pass
        finally:
            try:
                sink.shutdown(socket.SHUT_WR)  # pass the end of this direction on; the other may still run
            except OSError:
                pass


def test_os_episodes_run_on_a_daemon_reached_through_docker_host_over_tcp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackDockerProxy(daemon_socket()) as proxy:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{proxy.port}")
        result = evaluate(EvalConfig(envs=("OS-v0",), backends=("docker",), agent="oracle", n=3, concurrency=1,
                                     episode_timeout_s=120.0), tmp_path / "run")
        records = read_records(result.run_dir / "episodes.jsonl")
        assert len(records) == 3
        assert all(r.status == "done" and r.success for r in records), [(r.task_id, r.error) for r in records]
        # Container create, attach and start, and every command's bytes went through the proxy.
        assert proxy.connections >= 2
        assert proxy.bytes_to_daemon > 1000 and proxy.bytes_from_daemon > 1000
        assert result.summary["backends"] == ["docker"]
