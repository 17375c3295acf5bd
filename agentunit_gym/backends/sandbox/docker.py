"""The docker sandbox: one container per env, one persistent bash, reset in place.

Layout of a container (see docs/sandbox-docker.md):

* ``--network none``, ``--init``, a read-only root, every capability dropped except the
  few listed in :data:`CAPABILITIES`, pids/memory/CPU limits (:mod:`~agentunit_gym.backends.sandbox.limits`:
  the container's memory is ``memory + disk``, without swap, since the agent's files are on a
  tmpfs of ``disk`` bytes), the agent's processes at ``oom_score_adj`` 500 (the
  supervisor is never the OOM killer's choice: see ``AGENT_OOM_SCORE_ADJ``), log driver ``none``, label
  ``agentunit_gym=1`` and a unique name.
* Its main process is a small supervisor (``agentunit_gym/images/os/supervisor.py``) that we
  talk to over the attached stdin/stdout, one JSON line each way. It mounts an overlay
  (the image below, a tmpfs above) and runs the agent's bash and every command chrooted
  there, without the capabilities it keeps for itself (SYS_ADMIN, SYS_CHROOT, SETPCAP).
* ``reset()`` asks the supervisor to kill every other process, drop the overlay's upper
  layer and start a new shell (a few ms). When that cannot be done or proven (the container
  died, the supervisor was killed, processes survived), the container is replaced by a warm
  one from the pool or a new one.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import secrets
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any, ClassVar

from agentunit_gym.backends import process
from agentunit_gym.backends.images import LABEL
from agentunit_gym.backends.sandbox.base import AGENT_CAPABILITIES, ExecResult, Language, Sandbox
from agentunit_gym.backends.sandbox.limits import Limits, add_memory_note, resolve_limits
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, ConfigError
from agentunit_gym.images.os.shell_protocol import DEFAULT_RUNAWAY_BUDGET

SUPERVISOR_SOURCE = Path(__file__).resolve().parent.parent.parent / "images" / "os" / "supervisor.py"
SHELL_PROTOCOL_SOURCE = SUPERVISOR_SOURCE.with_name("shell_protocol.py")
"""The shell protocol shared with the local sandbox; the supervisor imports it."""
SHELL_DRIVER_SOURCE = SUPERVISOR_SOURCE.with_name("shell_driver.py")
"""The shell driver shared with the local sandbox; the supervisor imports it."""
SHIPPED_MODULES = (("AU_SHELL_PROTOCOL", "agentunit_gym.images.os.shell_protocol", SHELL_PROTOCOL_SOURCE),
                   ("AU_SHELL_DRIVER", "agentunit_gym.images.os.shell_driver", SHELL_DRIVER_SOURCE))
"""The modules the supervisor imports, in import order: (environment variable, name, source)."""

CAPABILITIES = (
    *AGENT_CAPABILITIES,  # what the agent (root in the container) keeps
    # Only the supervisor holds these (it removes them from the agent's bounding set):
    # mounting the overlay, chroot into it, dropping capabilities.
    "SYS_ADMIN", "SYS_CHROOT", "SETPCAP",
)

# The supervisor shows up as ``agentunit-sup`` / ``agentunit-supervisor``, and "python" is not
# in any command line of ours (docker-init's included: it forwards SIGTERM), so an agent
# cleaning up its python processes (pkill python3, killall python3, pkill -f python) does not
# take the sandbox down with them. The supervisor also ignores SIGTERM, SIGINT and SIGHUP.
# The boot line installs the shared shell protocol and driver under their package names (the
# supervisor imports them so, as on the host; an entry of sys.modules needs no parent package),
# then runs the supervisor. All travel in the environment: the image needs none of the files.
_BOOT = ("import os, sys, types\n"
         f"for var, name in {tuple((var, name) for var, name, _ in SHIPPED_MODULES)!r}:\n"
         "    m = sys.modules[name] = types.ModuleType(name)\n"
         "    exec(compile(os.environ.pop(var), name.rsplit('.', 1)[1] + '.py', 'exec'), m.__dict__)\n"
         "exec(compile(os.environ.pop('AU_SUPERVISOR'), 'supervisor.py', 'exec'), {'__name__': '__main__'})\n")
_GRACE_S = 15.0  # on top of a command's own timeout, for the supervisor to kill and report
_START_TIMEOUT_S = 60.0
_RESET_TIMEOUT_S = 10.0
_FILE_MISSING, _FILE_IS_DIR = 44, 45


class _Container:
    """One container and the line channel to its supervisor."""

    def __init__(self, client: Any, image: str, host_config: dict[str, Any], environment: dict[str, str],
                 name: str, timeout: float, owner: str) -> None:
        docker_errors = process.docker_sdk().errors
        from requests.exceptions import RequestException

        self.client = client
        self.name = name
        self.dead: str | None = None
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._frame = bytearray()
        self._next_id = 0
        try:
            created = client.api.create_container(
                image, command=["bash", "-c", 'exec -a agentunit-supervisor "$AU_PYTHON" -c "$AU_BOOT"'],
                name=name, environment={**environment, "AU_PYTHON": "python3", "AU_BOOT": _BOOT},
                labels={LABEL: "1", f"{LABEL}.kind": "sandbox", f"{LABEL}.pid": str(os.getpid()),
                        f"{LABEL}.sandbox": owner},
                stdin_open=True, tty=False, host_config=host_config, working_dir="/",
            )
        except docker_errors.ImageNotFound as exc:
            raise ConfigError(f"image {image!r} is not on the Docker daemon; build it with "
                              "`agentunit-gym images build os` or pass image=None.") from exc
        except docker_errors.APIError as exc:
            raise BackendUnavailableError(f"could not create sandbox container {name}: {exc}") from exc
        except RequestException as exc:  # the SDK lets the HTTP layer's timeouts through
            raise BackendTimeoutError(f"the Docker daemon did not create {name} in time ({exc}); "
                                      "it may be overloaded: retry, or run fewer envs at once.") from exc
        self.id: str = created["Id"]
        try:
            # Attach before start so the supervisor's first line cannot be missed.
            attached = client.api.attach_socket(self.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            # A SocketIO over a unix or TCP daemon (the socket is inside); already the socket over
            # TLS (DOCKER_TLS_VERIFY) and ssh:// (a paramiko channel, which has the same methods).
            self.sock: socket.socket = getattr(attached, "_sock", attached)
            self._attached = attached
            client.api.start(self.id)
            hello = self._read_line(time.monotonic() + timeout)
        except (docker_errors.APIError, BackendError, BackendTimeoutError, OSError, RequestException) as exc:
            self.remove()
            if isinstance(exc, BackendTimeoutError):
                raise
            raise BackendError(f"sandbox container {name} did not start from image {image!r} (it needs bash and "
                               f"python3): {exc}") from exc
        if not hello.get("ready"):
            self.remove()
            raise BackendError(f"sandbox container {name} could not set up its filesystem: {hello.get('error')}. "
                               "The image needs python3, and the daemon must allow overlay mounts inside containers.")

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BackendTimeoutError(f"sandbox container {self.name} did not answer in time")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 16)
        except TimeoutError as exc:
            raise BackendTimeoutError(f"sandbox container {self.name} did not answer in time") from exc
        except OSError as exc:
            data = b""
            self.dead = str(exc)
        if not data:
            self.dead = self.dead or "connection closed"
            tail = self._stderr[-500:].decode("utf-8", "replace")
            raise BackendError(f"sandbox container {self.name} is gone (killed, out of memory, or its supervisor "
                               f"was killed){': ' + tail if tail else ''}. Call reset() to get a new one.")
        return data

    def _read_line(self, deadline: float) -> dict[str, Any]:
        # The attach stream is multiplexed: 8-byte headers (stream, 0, 0, 0, big-endian size).
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[:newline + 1]
                reply: dict[str, Any] = json.loads(line)
                return reply
            self._frame += self._recv(deadline)
            while len(self._frame) >= 8:
                size = int.from_bytes(self._frame[4:8], "big")
                if len(self._frame) < 8 + size:
                    break
                payload = self._frame[8:8 + size]
                if self._frame[0] == 2:
                    self._stderr += payload
                    del self._stderr[:-4096]
                else:
                    self._buffer += payload
                del self._frame[:8 + size]

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its reply (deadline ``timeout`` s)."""
        if self.dead is not None:
            raise BackendError(f"sandbox container {self.name} is gone ({self.dead}). Call reset() to get a new one.")
        self._next_id += 1
        payload = dict(payload, id=self._next_id)
        try:
            self.sock.sendall(json.dumps(payload).encode() + b"\n")
        except OSError as exc:
            self.dead = str(exc)
            raise BackendError(f"sandbox container {self.name} is gone ({exc}). "
                               "Call reset() to get a new one.") from exc
        deadline = time.monotonic() + timeout
        try:
            while True:
                reply = self._read_line(deadline)
                if reply.get("id") == self._next_id:
                    break
        except BackendTimeoutError:
            self.dead = "did not answer"  # the channel is out of step now: never reuse it
            raise
        if "error" in reply and "out" not in reply and "ok" not in reply:
            raise BackendError(f"the sandbox supervisor failed: {reply['error']}")
        return reply

    def remove(self) -> None:
        self.dead = self.dead or "removed"
        # Close the SocketIO the SDK returned as well as the socket inside it: a socket with a
        # SocketIO still open only marks itself closed, and its descriptor stays open until the
        # garbage collector breaks the HTTP response's reference cycle (issue 19's 47th fd).
        for channel in (getattr(self, "_attached", None), getattr(self, "sock", None)):
            try:
                if channel is not None:
                    channel.close()
            except OSError:
                pass
        docker_errors = process.docker_sdk().errors
        from requests.exceptions import RequestException

        try:
            self.client.api.remove_container(self.id, force=True)
        except docker_errors.NotFound:
            pass
        except RequestException as exc:
            raise BackendError(f"could not remove sandbox container {self.name} in time: {exc}") from exc
        except docker_errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise BackendError(f"could not remove sandbox container {self.name}: {exc}") from exc
        except AttributeError:
            pass  # creation failed before an id existed


_OPEN: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
"""Sandboxes not closed yet: closed at interpreter exit so a forgotten close() leaves no container."""


@atexit.register
def _close_open_sandboxes() -> None:
    for sandbox in list(_OPEN):
        try:
            sandbox.close()
        except (BackendError, BackendTimeoutError, BackendUnavailableError):
            pass  # `agentunit-gym cleanup` finds what is left by its label


class DockerSandbox(Sandbox):
    """A sandbox in a Docker container (see the module docstring for the layout).

    Args:
        image: image tag; None builds or reuses the project's OS image (``ensure_image("os")``).
            Any image with python3 and bash works.
        memory: what the agent's processes may use, bytes or Docker syntax (``"512m"``; default
            1 GiB). Swap is off. The container's limit is ``memory + disk``: files are in memory.
        pids_limit: most processes at once (default 512; a fork bomb stops there).
        runaway_budget: most processes one shell command may leave running; when what it left
            keeps forking past this (a fork bomb), all of it is killed once the command returns
            or times out, so the next command can run. A few deliberate background jobs survive.
        network: give the container Docker's default bridge network (and its DNS settings)
            instead of none. Off by default: opt in only for tasks that must reach the
            network (e.g. ``apt-get install`` in an init script).
        cpus: CPU share, in cores (default 1).
        pool_size: warm spare containers kept ready for when an in-place reset is not possible.
        client: a Docker SDK client (default: the environment's daemon).
        disk: most bytes an episode may write (the overlay's upper layer, a tmpfs; default
            1 GiB). Past it, "No space left on device" in the agent's shell.
        tmpfs_size: the former name of ``disk`` (give one of them).
        start_timeout: deadline in seconds for a container to come up.

    Raises:
        BackendUnavailableError: no Docker daemon answers.
        ConfigError: an option is out of range.
    """

    kind: ClassVar[str] = "docker"

    def __init__(self, *, image: str | None = None, memory: str | int | None = None, pids_limit: int = 512,
                 cpus: float | str | None = None, pool_size: int = 1, client: Any | None = None,
                 disk: str | int | None = None, tmpfs_size: str | int | None = None,
                 start_timeout: float = _START_TIMEOUT_S, runaway_budget: int = DEFAULT_RUNAWAY_BUDGET,
                 network: bool = False) -> None:
        if runaway_budget < 1:
            raise ConfigError(f"runaway_budget must be >= 1, got {runaway_budget}")
        if pool_size < 0:
            raise ConfigError(f"pool_size must be >= 0, got {pool_size}")
        if disk is not None and tmpfs_size is not None:
            raise ConfigError("give disk= or its former name tmpfs_size=, not both.")
        self.limits: Limits = resolve_limits(memory=memory, cpus=cpus, pids=pids_limit,
                                             disk=disk if disk is not None else tmpfs_size)
        self._client = client if client is not None else process.docker_client(timeout=120.0)
        self._image = image
        self.memory, self.pids_limit, self.cpus = self.limits.memory, self.limits.pids, self.limits.cpus
        self.pool_size, self.disk = pool_size, self.limits.disk
        self.start_timeout, self.runaway_budget = start_timeout, runaway_budget
        self.network = network
        self._box: _Container | None = None
        self._pool: list[_Container] = []
        self._pool_lock = threading.Lock()
        self._refill_thread: threading.Thread | None = None
        self._removers: list[threading.Thread] = []
        self._closed = False
        _OPEN.add(self)
        self.instance_id = secrets.token_hex(6)
        """Value of the ``agentunit_gym.sandbox`` label on this sandbox's containers (pool included)."""
        self.recreated = 0
        """How many times a reset replaced the container (pool or new) instead of resetting in place."""

    # -- containers ---------------------------------------------------------------------------------

    @property
    def image(self) -> str:
        """The image tag in use (built on first access when ``image`` was None)."""
        if self._image is None:
            from agentunit_gym.backends.images import ensure_image

            self._image = ensure_image("os", client=self._client)
        return self._image

    @property
    def container_name(self) -> str | None:
        """Name of the current container (None before start)."""
        return self._box.name if self._box is not None else None

    def _new_container(self) -> _Container:
        LogConfig = process.docker_sdk().types.LogConfig

        host_config = self._client.api.create_host_config(
            network_mode="bridge" if self.network else "none", init=True, read_only=True, cap_drop=["ALL"],
            cap_add=list(CAPABILITIES),
            pids_limit=self.limits.pids, mem_limit=self.limits.cgroup_memory,
            memswap_limit=self.limits.cgroup_memory,
            nano_cpus=int(self.limits.cpus * 1e9), tmpfs={"/run/au": "size=4m,mode=700"},
            log_config=LogConfig(type="none"),  # json-file stalls on large outputs (ARCHITECTURE)
            security_opt=["no-new-privileges"],
        )
        name = f"agentunit-os-{secrets.token_hex(6)}"
        environment = {"AU_SUPERVISOR": SUPERVISOR_SOURCE.read_text(),
                       **{var: source.read_text() for var, _, source in SHIPPED_MODULES},
                       "AU_TMPFS_SIZE": str(self.limits.disk),
                       "AU_PIDS_LIMIT": str(self.limits.pids), "AU_RUNAWAY_BUDGET": str(self.runaway_budget),
                       "AU_NETWORK": "1" if self.network else "0"}
        return _Container(self._client, self.image, host_config, environment, name, self.start_timeout,
                          self.instance_id)

    def _take_container(self) -> _Container:
        with self._pool_lock:
            box = self._pool.pop() if self._pool else None
        if box is None:
            box = self._new_container()
        self._start_refill()
        return box

    def _start_refill(self) -> None:
        if self.pool_size == 0 or self._closed:
            return
        with self._pool_lock:
            if self._refill_thread is not None and self._refill_thread.is_alive():
                return
            self._refill_thread = threading.Thread(target=self._refill, name="agentunit-pool", daemon=True)
            self._refill_thread.start()

    def _refill(self) -> None:
        # Runs in the background; a failure here only means the next fallback creates a container.
        while True:
            with self._pool_lock:
                if self._closed or len(self._pool) >= self.pool_size:
                    return
            try:
                box = self._new_container()
            except (BackendError, BackendUnavailableError, BackendTimeoutError, ConfigError):
                return
            with self._pool_lock:
                if not self._closed:
                    self._pool.append(box)
                    continue
            box.remove()  # closed while it was being created
            return

    def _current(self) -> _Container:
        if self._closed:
            raise BackendError("this DockerSandbox is closed; create a new one.")
        if self._box is None:
            self._box = self._take_container()
        return self._box

    # -- the Sandbox interface ----------------------------------------------------------------------

    def start(self) -> None:
        """Create the container (and start filling the warm pool). Idempotent."""
        self._current()

    def shell(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """Run ``command`` in the agent's persistent bash.

        Raises:
            BackendError: the container is gone (call :meth:`reset`).
            BackendTimeoutError: the supervisor did not answer (the container is then dropped).
        """
        return self._shell(command, timeout, max_output, setup=False)

    def shell_setup(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """As :meth:`shell`, for the task's start script: what it leaves is not watched
        (:meth:`Sandbox.shell_setup <agentunit_gym.backends.sandbox.base.Sandbox.shell_setup>`)."""
        return self._shell(command, timeout, max_output, setup=True)

    def _shell(self, command: str, timeout: float, max_output: int, *, setup: bool) -> ExecResult:
        request: dict[str, Any] = {"op": "shell", "cmd": command, "timeout": timeout, "max": max_output}
        if setup:
            request["setup"] = True
        reply = self._current().request(request, timeout + _GRACE_S)
        result = _result(reply)
        return add_memory_note(result, self.limits) if reply.get("oom") else result  # [limits]

    def run(self, command: str, *, timeout: float = 30.0, language: Language = "bash",
            args: tuple[str, ...] = (), max_output: int = 1 << 20) -> ExecResult:
        """Run a one-off command as root in the sandbox's filesystem, outside the agent's shell.

        Raises:
            ConfigError: unknown language. BackendError: the container is gone.
        """
        if language == "bash":
            argv = ["bash", "-c", command, "bash", *args]
        elif language == "python":
            argv = ["python3", "-c", command, *args]
        else:
            raise ConfigError(f"language must be 'bash' or 'python', got {language!r}")
        return _result(self._run_argv(argv, timeout=timeout, max_output=max_output))

    def _run_argv(self, argv: list[str], *, timeout: float, max_output: int,
                  stdin: bytes | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"op": "run", "argv": argv, "timeout": timeout, "max": max_output}
        if stdin is not None:
            payload["stdin"] = base64.b64encode(stdin).decode()
        return self._current().request(payload, timeout + _GRACE_S)

    def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> bytes:
        """The bytes of ``path`` (at most ``max_bytes``).

        Raises:
            FileNotFoundError: no such file. IsADirectoryError: it is a directory.
            BackendError: the read failed otherwise, or the container is gone.
        """
        script = 'if [ ! -e "$1" ]; then exit 44; fi; if [ -d "$1" ]; then exit 45; fi; exec cat -- "$1"'
        reply = self._run_argv(["sh", "-c", script, "sh", path], timeout=60.0, max_output=max_bytes)
        if reply.get("exit") == _FILE_MISSING:
            raise FileNotFoundError(path)
        if reply.get("exit") == _FILE_IS_DIR:
            raise IsADirectoryError(path)
        if reply.get("exit") != 0:
            raise BackendError(f"reading {path} in the sandbox failed: {_decode(reply)[:500]}")
        return base64.b64decode(reply["out"])

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace ``path`` with ``data`` (parents created, then ``chmod mode``).

        Raises:
            BackendError: the write failed (e.g. the path is a directory), or the container is gone.
        """
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1" && chmod "$2" -- "$1"'
        reply = self._run_argv(["sh", "-c", script, "sh", path, format(mode, "o")], timeout=60.0,
                               max_output=4096, stdin=data)
        if reply.get("exit") != 0:
            raise BackendError(f"writing {path} in the sandbox failed: {_decode(reply)[:500]}")

    def reset(self) -> None:
        """Back to the image's state: in place when possible, else a pool or new container.

        Raises:
            BackendUnavailableError: no container can be created.
        """
        if self._closed:
            raise BackendError("this DockerSandbox is closed; create a new one.")
        box = self._box
        if box is None:
            self.start()
            return
        if box.dead is None:
            try:
                if box.request({"op": "reset"}, _RESET_TIMEOUT_S).get("ok"):
                    return
            except (BackendError, BackendTimeoutError):
                pass  # fall through: replace the container
        # Pristine state could not be proven in place: replace the container. The old one is
        # removed in the background (a removal takes ~0.1 s); close() waits for it.
        self._box = None
        remover = threading.Thread(target=_remove_quietly, args=(box,), name="agentunit-remove", daemon=True)
        remover.start()
        self._removers = [t for t in self._removers if t.is_alive()] + [remover]
        self._box = self._take_container()
        self.recreated += 1

    def close(self) -> None:
        """Remove the container and the warm pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        for thread in [self._refill_thread, *self._removers]:
            if thread is not None:
                thread.join(timeout=self.start_timeout + 5)
        with self._pool_lock:
            boxes, self._pool = self._pool, []
        if self._box is not None:
            boxes.append(self._box)
            self._box = None
        errors: list[str] = []

        def remove(box: _Container) -> None:
            try:
                box.remove()
            except BackendError as exc:
                errors.append(str(exc))

        # Side by side: the daemon overlaps removals (two took ~150 ms against ~200 ms in turn).
        removers = []
        for box in boxes[1:]:
            thread = threading.Thread(target=remove, args=(box,), name="agentunit-remove", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no new threads while the interpreter shuts down (atexit)
                remove(box)
            else:
                removers.append(thread)
        for box in boxes[:1]:
            remove(box)
        for thread in removers:
            thread.join()
        if errors:
            raise BackendError("; ".join(errors) + " (remove them with `agentunit-gym cleanup`)")

    def __del__(self) -> None:  # a forgotten close() must not leave containers behind
        try:
            if not getattr(self, "_closed", True):
                self.close()
        except Exception:  # noqa: BLE001 - nothing can be reported from a finalizer
            pass


def _remove_quietly(box: _Container) -> None:
    try:
        box.remove()
    except BackendError:
        pass  # `agentunit-gym cleanup` finds it by its label; the episode must go on


def _decode(reply: dict[str, Any]) -> str:
    return base64.b64decode(reply.get("out", "")).decode("utf-8", "replace")


def _result(reply: dict[str, Any]) -> ExecResult:
    return ExecResult(
        output=_decode(reply),
        exit_code=reply.get("exit"),
        timed_out=bool(reply.get("timed_out")),
        truncated=bool(reply.get("truncated")),
        output_bytes=int(reply.get("total", 0)),
        duration_s=float(reply.get("duration", 0.0)),
    )
