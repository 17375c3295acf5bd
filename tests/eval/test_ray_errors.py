"""``--ray`` refusals that must be fast and clear: no ray installed, a malformed address, a
cluster that does not answer, ``--vector`` with ``--ray``. None of them starts Ray."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentunit_gym.errors import BackendUnavailableError, ConfigError, MissingDependencyError
from agentunit_gym.eval.run import cluster_connect as cluster
from tests.cli.clitools import cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


def test_without_ray_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install "agentunit-gym\[ray\]"'):
        cluster.connect("auto")


def test_the_cli_without_ray_exits_with_the_pip_line(tmp_path: Path) -> None:
    # A sitecustomize that hides ray, as a machine without the extra has it.
    (tmp_path / "hide").mkdir()
    (tmp_path / "hide" / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "hide")}
    done = subprocess.run([sys.executable, "-m", "agentunit_gym", "eval", "--ray", "auto", "--env", "DB-v0",
                           "--backend", "sqlite", "-n", "1", "--quiet"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr  # a missing extra is a ConfigError: the fix is the user's
    assert 'pip install "agentunit-gym[ray]"' in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()  # refused before any run folder was made


@pytest.mark.parametrize("address", ["", "nohost", "host:", "host:99999", "http://host:6379", "a b:1"])
def test_a_malformed_address_is_a_config_error(address: str) -> None:
    with pytest.raises(ConfigError, match="--ray"):
        cluster.check_address(address)


@pytest.mark.parametrize(("address", "expected"), [
    ("local", None), ("auto", None), ("10.0.0.5:6379", ("10.0.0.5", 6379)),
    ("ray://head.example:10001", ("head.example", 10001)), ("[::1]:6379", ("::1", 6379)),
])
def test_addresses_that_are_taken(address: str, expected: tuple[str, int] | None) -> None:
    assert cluster.check_address(address) == expected


@pytest.mark.ray
def test_a_cluster_that_does_not_answer_fails_fast_with_a_typed_error() -> None:
    # Our probe's error (ray.init's own retries would end in another), so it failed at the probe.
    with pytest.raises(BackendUnavailableError, match="no Ray cluster answers at 127.0.0.1"):
        cluster.connect(f"127.0.0.1:{closed_port()}")


@pytest.mark.ray
@pytest.mark.parametrize("answer", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n"], ids=["silent", "http"])
def test_a_port_that_is_not_ray_fails_fast_instead_of_hanging(answer: bytes | None) -> None:
    # Ray itself waits minutes on a port that accepts connections but never speaks its protocol.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        held: list[socket.socket] = []

        def accept() -> None:
            conn, _ = server.accept()
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        with pytest.raises(BackendUnavailableError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
            cluster.connect(f"127.0.0.1:{port}", timeout_s=2.0)
        thread.join(timeout=5)
        for conn in held:
            conn.close()


@pytest.mark.ray
def test_the_cli_refuses_an_unreachable_cluster_before_making_a_run_folder(tmp_path: Path) -> None:
    done = cli("eval", "--ray", f"127.0.0.1:{closed_port()}", "--env", "DB-v0", "--backend", "sqlite", "-n", "1",
               "--quiet", cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert "no Ray cluster answers at 127.0.0.1" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()


def test_ray_with_vector_is_refused(tmp_path: Path) -> None:
    done = cli("eval", "--ray", "local", "--vector", "threads", "--env", "DB-v0", "--backend", "sqlite", "-n", "1",
               "--quiet", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "--vector" in done.stderr, done.stderr


def test_auto_without_a_cluster_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    def init(**kwargs: object) -> None:  # what ray.init(address="auto") raises with no cluster here
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to by "
                              "setting `--address` flag or `RAY_ADDRESS` environment variable.")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setattr(cluster, "import_ray", lambda: fake)
    with pytest.raises(BackendUnavailableError, match=r"ray start --head.*--ray HOST:PORT.*--ray local"):
        cluster.connect("auto")
