"""The seam through which agentunit-gym runs one-off processes and talks to the Docker daemon.

Every process the library runs to completion (``git``, ``debootstrap``, ``tar``, the local
sandbox's probes ...) goes through :func:`run`, and every Docker client comes from
:func:`docker_client`, so tests can observe the commands and error paths without a daemon
(monkeypatch :data:`RUNNER` or :func:`docker_client`), and every call has a deadline.

Four places start processes themselves, because they need a live process with pipes, a
terminal or a namespace for longer than one call, which a run-to-completion seam cannot
give; each does so in one function, with its own deadlines:

- the local sandbox's processes (its namespace holder, the agent's shell, the box's
  spawner, one-off commands through the exec chain): ``_Boxes.spawn`` in
  :mod:`agentunit_gym.backends.sandbox.local.box`;
- the user-mapping probe: ``_probe`` in :mod:`agentunit_gym.backends.sandbox.usermap`;
- the local box's spawner (:mod:`agentunit_gym.backends.sandbox.local.spawner_main`), which
  runs inside a box and starts each one-off command there itself (``_start_direct``: a vfork
  from the agent's namespaces), or forks a child that execs it (``_become``);
- the OS image's supervisor (:mod:`agentunit_gym.images.os.supervisor`), which runs inside
  the container, not in the library's process.

tests/backends/test_process.py holds the package to this list.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentunit_gym.errors import BackendTimeoutError, BackendUnavailableError, MissingDependencyError


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


def _run(argv: Sequence[str], timeout: float, input: bytes | None, env: dict[str, str] | None) -> ProcessResult:
    try:
        done = subprocess.run(list(argv), input=input, capture_output=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BackendTimeoutError(f"{argv[0]} did not finish within {timeout:g} s: {' '.join(argv)[:200]}") from exc
    except FileNotFoundError as exc:
        raise BackendUnavailableError(f"{argv[0]!r} is not installed or not on PATH.") from exc
    return ProcessResult(tuple(argv), done.returncode, done.stdout, done.stderr)


RUNNER: Callable[[Sequence[str], float, bytes | None, dict[str, str] | None], ProcessResult] = _run
"""The function that runs processes; tests may replace it."""


def run(argv: Sequence[str], *, timeout: float, input: bytes | None = None,
        env: dict[str, str] | None = None) -> ProcessResult:
    """Run a process to completion with a deadline.

    Raises:
        BackendTimeoutError: it ran past ``timeout`` seconds (it is killed).
        BackendUnavailableError: the program does not exist.
    """
    return RUNNER(argv, timeout, input, env)


def which(program: str) -> str | None:
    return shutil.which(program)


def docker_sdk(extra: str = "docker", purpose: str = "The Docker backend") -> Any:
    """The Docker SDK's module (``docker``; its ``errors`` and ``types`` with it): the one place
    the package imports it, so a missing SDK is always the error with the pip line.

    Args:
        extra: the extra to name in the pip line (``mysql`` brings the SDK with pymysql).
        purpose: what needs it, for the message.

    Raises:
        MissingDependencyError: the ``docker`` package is not installed.
    """
    try:
        import docker
    except ImportError as exc:
        raise MissingDependencyError("docker", extra, purpose) from exc
    return docker


def docker_client(timeout: float = 60.0) -> Any:
    """A Docker SDK client for the daemon of the environment (DOCKER_HOST or the default socket).

    Raises:
        MissingDependencyError: the ``docker`` package is not installed.
        BackendUnavailableError: no daemon answers.
    """
    docker = docker_sdk()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as exc:
        raise BackendUnavailableError(
            f"no Docker daemon answers ({exc}). Start one (e.g. `dockerd &`, or `systemctl start docker`) "
            "or use an embedded backend (backend='local' / 'sqlite')."
        ) from exc
    return client


def docker_available(timeout: float = 3.0) -> bool:
    """Whether a Docker daemon answers within ``timeout`` seconds."""
    try:
        docker_client(timeout=timeout).close()
    except (BackendUnavailableError, MissingDependencyError):
        return False
    return True


def docker_absence() -> str:
    """Why :func:`docker_available` said no, for the note an ``auto`` backend logs (no second probe)."""
    import importlib.util

    if importlib.util.find_spec("docker") is None:
        return 'the docker SDK is not installed: pip install "agentunit-gym[docker]"'
    return "no Docker daemon answers"
