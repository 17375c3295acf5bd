"""A box (dirs, holder, the agent's shell process) and the processes started in it."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.base import ExecResult
from agentunit_gym.backends.sandbox.local.etc_template import (
    ETC_READ_ONLY,
    ETC_READ_ONLY_FILES,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    WRITABLE_DIRS,
    _default_signals_argv,
    agent_caps_argv,
    drop_privileges_argv,
    holder_argv,
    nsenter_has_wdns,
    tool_path,
)
from agentunit_gym.backends.sandbox.local.procfs import (
    _children,
    _children_ints,
    _proc_stat_fields,
    _scan_processes,
    _wait_readable,
)
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.backends.sandbox.local.spawner import Spawner
from agentunit_gym.errors import BackendError, BackendTimeoutError
from agentunit_gym.images.os.shell_driver import ShellDriver
from agentunit_gym.images.os.shell_protocol import AGENT_OOM_SCORE_ADJ, Capture

logger = logging.getLogger("agentunit_gym")

_DIR_MODES = {"/tmp": 0o1777, "/root": 0o700}
# Inside the fresh /var and /run (mode, or a symlink target).
_SKELETON: tuple[tuple[str, int | str], ...] = (
    ("var/tmp", 0o1777), ("var/log", 0o755), ("var/lib", 0o755), ("var/cache", 0o755), ("var/spool", 0o755),
    ("var/mail", 0o2775), ("var/backups", 0o755), ("var/local", 0o2775), ("var/opt", 0o755),
    ("var/run", "/run"), ("var/lock", "/run/lock"), ("run/lock", 0o1777), ("home/agent", 0o755),
)


_DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
}


_SPAWNER_ENV = {"PATH": "/usr/bin:/bin", "TZ": "UTC0", "LC_ALL": "C"}
"""The spawner's own environment (a command gets the sandbox's, per request)."""

_START_TIMEOUT_S = 10.0
_KILL_TIMEOUT_S = 5.0
# After a timeout: how long we keep killing the command's process groups (a fork bomb keeps
# making new ones), then how long the shell gets to print its sentinel before we decide it is
# stuck in a loop of its own (``while :; do sleep 1; done``) and start a new one.
_KILL_ROUNDS_S = 0.5
_SHELL_GRACE_S = 1.0
_SHELL_END_GRACE_S = 0.5
"""How long the processes above a killed agent's PID 1 get to end by themselves."""
_CHUNK = 1 << 16



def _result(capture: Capture, exit_code: int | None, timed_out: bool, started: float) -> ExecResult:
    """The :class:`ExecResult` of a command whose output ``capture`` holds."""
    return ExecResult(output=capture.text(), exit_code=exit_code, timed_out=timed_out, truncated=capture.truncated,
                      output_bytes=capture.total, duration_s=time.monotonic() - started)


@dataclass
class _Shell:
    proc: subprocess.Popen[bytes]
    """The session leader we started: ``nsenter`` (the bash itself when unisolated)."""
    stdin: IO[bytes]
    fd: int
    """The terminal's master side: the commands' output and the sentinels."""
    exit_fd: int
    """A pidfd of the shell's process: readable once it has exited."""
    eof: bool = False
    init_pid: int | None = None
    """Host pid of the interactive bash, PID 1 of the agent's own pid namespace (once found)."""
    slave: str = ""
    """The terminal's path (to drop input no process read)."""
    depth: int = 3
    """How many processes :meth:`chain` has: 3 (nsenter, bwrap or unshare, bash), or 1 when
    unisolated (the bash, no pid namespace)."""
    driver: ShellDriver = field(init=False)
    """Commands, nested shells and timeouts (the state machine shared with the docker supervisor)."""

    @property
    def sid(self) -> int:
        """Host pid of the process we started (its process group's id; the session's, but in a
        sandbox, where the agent's PID 1 leads a session of its own)."""
        return self.proc.pid

    def chain(self) -> list[int]:
        """Host pids from the process we started down to the interactive bash (nsenter, bwrap or
        unshare, bash)."""
        found = [self.sid]
        while len(found) < self.depth:
            kids = _children(found[-1])
            if not kids:
                break
            found.append(int(kids[0]))
        return found

    def find_init(self) -> int | None:
        """Host pid of the last process of :meth:`chain` once it is whole (in a sandbox the
        agent's PID 1; unisolated the bash), remembered in ``init_pid``."""
        if self.init_pid is None:
            chain = self.chain()
            if len(chain) == self.depth:
                self.init_pid = chain[-1]
        return self.init_pid


def _open_init(shell: _Shell) -> int | None:
    """A pidfd of the agent's PID 1 below ``shell``'s process (None: unisolated, or gone)."""
    init = shell.find_init() if shell.depth > 1 else None
    if init is None:
        return None
    try:
        pidfd = os.pidfd_open(init)
    except OSError:
        return None
    chain = shell.chain()
    if len(chain) != shell.depth or chain[-1] != init:  # it ended, and the pid may be another's
        os.close(pidfd)
        return None
    return pidfd


@dataclass
class _Box:
    """One incarnation of the sandbox: private dirs, the namespaces' holder, the agent's shell.

    ``reset()`` resets a box in place when it can (:meth:`LocalSandbox._recycle`), else
    throws it away and continues in a fresh one (the warm spare when ready).
    """

    dir: Path
    """Holds ``w/`` (the writable dirs, bound into the sandbox) and ``root/`` (unshare's new root)."""
    holder: subprocess.Popen[bytes] | None = None
    ns_pid: int | None = None
    """Host pid of the namespaces' pid 1: what nsenter targets, and what reset kills."""
    shell: _Shell | None = None
    next_shell: Future[_Shell] | None = None
    """The next episode's shell, started in the background during this one (a reset in place
    takes it): in a pid, mount and IPC namespace of its own, idle, unseen by this episode."""
    mounts: frozenset[str] = frozenset()
    """The box's mount points once it started: a reset in place needs them unchanged."""
    tainted: bool = False
    """A process ran in the box's own namespaces rather than the agent's (no shell was up):
    what it left there is not known, so a reset replaces the box."""
    spawner: Spawner | None = None
    """The box's one-off spawner, started with the box (it outlives resets in place); None where it
    cannot run, or once it is gone: one-offs then go through the exec chain."""
    spawner_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while a spawner found gone is dropped (two threads' one-offs must not close it twice)."""
    respawn: bool = False
    """The spawner was dropped while the box lives on (it stalled): the next reset in place
    starts another, before the agent runs anything."""

    def writable(self, sandbox_dir: str) -> Path:
        return self.dir / "w" / sandbox_dir.lstrip("/")

    def map_writable(self, sandbox_path: str) -> Path | None:
        """The host path behind a normalised sandbox path, if it lies in a writable dir."""
        for d in WRITABLE_DIRS:
            if sandbox_path == d or sandbox_path.startswith(d + "/"):
                return self.writable(d) / sandbox_path[len(d):].lstrip("/")
        return None


def died_error() -> BackendError:
    return BackendError("the local sandbox died (its processes were killed from outside or it ran out of "
                        "resources); call reset() to get a fresh sandbox.")


class _Boxes:
    """The processes of a local sandbox's boxes: the holder, entering a box, the agent's shell
    process ending, a box ending. One part of :class:`~.sandbox.LocalSandbox`; the others get
    it to start and end processes (:meth:`spawn` is the one place that creates them)."""

    def __init__(self, setup: _Setup) -> None:
        self.setup = setup

    def drop_next_shell(self, box: _Box) -> None:
        future, box.next_shell = box.next_shell, None
        if future is not None:
            self.end_when_up(future)

    def end_when_up(self, future: Future[_Shell]) -> None:
        """End the shell ``future`` starts, once (and if) it is up."""
        future.add_done_callback(lambda done: done.exception() is None and self.end_shell(done.result()))

    # ------------------------------------------------------------------ processes of the box

    def spawn(self, argv: Sequence[str], *, stdin: int | IO[bytes], stdout: int, stderr: int,
               in_sandbox: bool, pass_fds: tuple[int, ...] = (), tty: str | None = None,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a process in its own session: the one place this module creates processes.
        With ``tty`` (a terminal's path), that terminal becomes the session's controlling
        terminal (for the agent's shell: job control).

        Every process joins the box's cgroup (memory, CPU, pids: :mod:`.cgroup`) when there is
        one, ``in_sandbox`` ones at :data:`AGENT_OOM_SCORE_ADJ` (the OOM killer's choice, never
        the holder). Without a pids cgroup, ``in_sandbox`` processes get RLIMIT_NPROC instead,
        set before they enter the user namespace so it counts the sandbox's processes only;
        the holder never gets it (an RLIMIT_NPROC set when a user namespace is created also
        caps the caller's own processes). Both are set by a tiny exec wrapper rather than
        ``preexec_fn``, which would cost a full fork of this process (~2 ms more per process).
        """
        if self.setup.mechanism != "none":
            argv = [*drop_privileges_argv(), *argv]
        new_session = True
        if self.setup.cgroup is not None and self.setup.cgroup.dirs:
            # A session leader that opens a terminal gets it as its controlling terminal: the
            # wrapper does that as well, which saves a `setsid --ctty` process.
            argv = self.setup.cgroup.join_argv(argv, tty=tty, oom_score_adj=AGENT_OOM_SCORE_ADJ if in_sandbox else None)
        else:
            if tty is not None:
                argv = ["setsid", "--ctty", *argv]
                new_session = False  # setsid makes the session (a group leader would have it fork)
        if "pids" not in (self.setup.cgroup.controllers if self.setup.cgroup is not None else ()):
            if in_sandbox and self.setup.prlimit is not None:
                argv = [self.setup.prlimit, f"--nproc={self.setup.pids_limit}:{self.setup.pids_limit}", "--", *argv]
        argv = [*_default_signals_argv(), *argv]
        try:
            return subprocess.Popen(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=env or self.setup.env,
                                    start_new_session=new_session, close_fds=True, pass_fds=pass_fds)
        except OSError as exc:
            raise BackendError(f"could not start {argv[0]!r} for the local sandbox: {exc}") from exc

    def etc_read_only(self) -> list[tuple[str, Path]]:
        """(path under /etc, template path) of the template's trees and files bound read-only
        into each box (looked up once: the template does not change)."""
        assert self.setup.root is not None
        assert self.setup.etc is not None
        etc = self.setup.etc
        if self.setup.etc_bound is None:
            self.setup.etc_bound = [(rel, etc / rel) for rel in ETC_READ_ONLY if (etc / rel).is_dir()] \
                + [(rel, etc / rel) for rel in ETC_READ_ONLY_FILES if (etc / rel).is_file()]
        return self.setup.etc_bound

    def _holder_argv(self, box: _Box) -> list[str]:
        assert self.setup.mechanism in ("bwrap", "unshare")
        return holder_argv(self.setup.mechanism, box.dir, multi_user=bool(self.setup.multi_user),
                           network=self.setup.network, etc_binds=self.etc_read_only())

    def start_holder(self, box: _Box) -> None:
        holder = self.spawn(self._holder_argv(box), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, in_sandbox=False)
        box.holder = holder
        assert holder.stdin is not None and holder.stdout is not None and holder.stderr is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        try:
            line = self._read_line(holder.stdout.fileno(), deadline)
            if line == b"map" and self.setup.multi_user:
                line = self._map_users(holder, deadline)
            if line != b"ready":
                holder.kill()
                err = b""
                with contextlib.suppress(Exception):
                    holder.wait(timeout=_KILL_TIMEOUT_S)
                    err = holder.stderr.read()[-600:]
                raise BackendError(f"the {self.setup.mechanism} sandbox did not start: "
                                   f"{err.decode('utf-8', 'replace').strip() or 'no output'}")
        finally:
            holder.stdout.close()
            holder.stderr.close()
        # The namespace's pid 1 (bwrap's init, or our setup shell under unshare) is the
        # holder's child; the wrapper that joined the cgroup has exec'd into the holder.
        try:
            children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()
        except OSError:
            children = []
        if not children:
            raise BackendError(f"the {self.setup.mechanism} sandbox started but its namespace process was not found.")
        box.ns_pid = int(children[0])

    def _map_users(self, holder: subprocess.Popen[bytes], deadline: float) -> bytes:
        """Write the user namespace's uid/gid range (the holder waits in usermap.GATE), let it go
        on, and return its next line (``ready``). A failure kills it: nothing runs unmapped."""
        assert holder.stdin is not None and holder.stdout is not None
        target = holder.pid
        if self.setup.mechanism == "unshare":  # unshare --fork: the gate runs in its child
            for _ in range(100):
                children = _children_ints(holder.pid)
                if children or time.monotonic() > deadline:
                    break
                time.sleep(0.001)
            if not children:
                raise BackendError("the unshare sandbox's user namespace process was not found.")
            target = children[0]
        try:
            usermap.write_maps(target)
            holder.stdin.write(b"go\n")
            holder.stdin.flush()
        except OSError as exc:
            holder.kill()
            raise BackendError(f"could not map the local sandbox's users (host ids {usermap.BASE}-"
                               f"{usermap.BASE + usermap.COUNT - 1}): {exc}") from exc
        return self._read_line(holder.stdout.fileno(), deadline)

    @staticmethod
    def _read_line(fd: int, deadline: float) -> bytes:
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendTimeoutError(f"the local sandbox did not start within {_START_TIMEOUT_S:g} s.")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
        return buf.split(b"\n", 1)[0]

    def enter_argv(self, box: _Box, argv: Sequence[str], *, new_shell: bool = False) -> list[str]:
        """``argv`` to run inside the sandbox (or on the host when unisolated): in the agent's
        namespaces with the agent's capabilities, in the workdir; with ``new_shell``, in the
        box's own namespaces with all of root's there (what the agent's shell starts from)."""
        if self.setup.mechanism == "none":
            # On the host: at least keep HOME and temp files in the box's private dirs.
            return ["/usr/bin/env", f"HOME={box.writable('/root')}", f"TMPDIR={box.writable('/tmp')}", *argv]
        assert box.ns_pid is not None
        # Into the agent's own pid namespace (and its /proc, /dev/shm, IPC) once its shell is
        # up, else the box's.
        target = None if new_shell else self.agent_init(box)
        if target is None and not new_shell:
            box.tainted = True
        nsenter = tool_path("nsenter")
        # The workdir: nsenter changes to it inside (--wdns) where it can, else env does.
        wdns = not new_shell and nsenter_has_wdns(nsenter)
        # With network=True the sandbox is in the host's network namespace, which we may not enter.
        workdir = self.setup.workdir
        return [nsenter, "-t", str(target or box.ns_pid), "-U", "-m", "-p", *([] if self.setup.network else ["-n"]),
                "-i", "-u", "-r", *([f"--wdns={workdir}"] if wdns else []), "--preserve-credentials", "--",
                *(argv if new_shell else [*agent_caps_argv(), *([] if wdns else
                                                                ["/usr/bin/env", f"--chdir={workdir}"]), *argv])]

    @staticmethod
    def agent_init(box: _Box) -> int | None:
        """Host pid of the agent's shell, PID 1 of the agent's pid namespace; None when there is none."""
        shell = box.shell
        if shell is None or shell.eof:
            return None
        init = shell.find_init()  # nsenter, bwrap or unshare, its child: the shell
        if init is not None and _proc_stat_fields(init) is None:
            return None
        return init

    def workdir_in(self, box: _Box) -> str:
        return str(box.writable("/root")) if self.setup.mechanism == "none" else self.setup.workdir

    def jobs_file(self, box: _Box) -> str:
        """Where the driver lists the shell's jobs, as the shell sees the path."""
        return str(box.writable("/run") / "jobs") if self.setup.mechanism == "none" else "/run/.agentunit-gym-jobs"

    def box_alive(self, box: _Box) -> bool:
        if self.setup.mechanism == "none":
            return True
        if box.holder is None or box.holder.poll() is not None or box.ns_pid is None:
            return False
        # The namespace's init may be dead (a zombie) before the holder notices.
        fields = _proc_stat_fields(box.ns_pid)
        if fields is None:
            return False
        # Dead, or on its way out (PF_EXITING: killed, now taking the namespace down).
        return fields[0] not in (b"Z", b"X") and not int(fields[6]) & 0x4

    def stop_shell(self, box: _Box) -> None:
        shell, box.shell = box.shell, None
        if shell is not None:
            self.end_shell(shell)

    @staticmethod
    def end_shell(shell: _Shell) -> None:
        """Kill a shell (its pid namespace, then what we started) and wait for it, with a
        deadline; close our ends."""
        deadline = time.monotonic() + _KILL_TIMEOUT_S
        failure: str | None = None
        # The agent's PID 1 first, through a pidfd: the kernel then kills its whole pid
        # namespace, whatever groups its processes are in, and its pidfd reads as ended once
        # every process of it is gone. Then the processes above it end by themselves, each
        # reaping the next (killing them first would leave PID 1 to the box's init to reap).
        init = _open_init(shell)
        if init is not None:
            try:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(init, signal.SIGKILL)
                if not _wait_readable(init, max(0.0, deadline - time.monotonic())):
                    failure = "the agent's processes in the local sandbox did not exit after SIGKILL."
            finally:
                os.close(init)
        with contextlib.suppress(OSError):
            shell.stdin.close()
        try:
            if failure is None and init is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    shell.proc.wait(timeout=min(_SHELL_END_GRACE_S, max(0.0, deadline - time.monotonic())))
            if shell.proc.poll() is None:
                # The group of the process we started (ours, not reaped: its pid is its own), and
                # the groups below it (bwrap's or unshare's; unisolated, the bash's jobs).
                for group in (shell.sid, *(int(pid) for pid in _children(shell.sid))):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(group, signal.SIGKILL)
                shell.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failure = failure or "the local sandbox's shell did not exit after SIGKILL."
        finally:
            for fd in (shell.fd, shell.exit_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        if failure is not None:
            raise BackendTimeoutError(failure)

    def stop_box(self, box: _Box) -> None:
        """Kill the box's shell and every process of its namespaces, and wait for them (with a deadline)."""
        deadline = time.monotonic() + _KILL_TIMEOUT_S
        self.drop_next_shell(box)
        try:
            if self.setup.mechanism == "none" and box.shell is not None:
                # No pid namespace: kill the shell's session (daemons that left it escape).
                for pid, (_, session) in _scan_processes():
                    if session == box.shell.sid:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
            if box.ns_pid is not None:
                # SIGKILL to the pid namespace's init makes the kernel kill all its processes.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(box.ns_pid, signal.SIGKILL)
            self.stop_shell(box)
        finally:
            spawner, box.spawner = box.spawner, None
            if spawner is not None:
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    spawner.close()
            box.ns_pid = None
            holder, box.holder = box.holder, None
            if holder is not None:
                with contextlib.suppress(OSError):
                    if holder.stdin is not None:
                        holder.stdin.close()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(holder.pid, signal.SIGKILL)
                try:
                    holder.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired as exc:
                    raise BackendTimeoutError(f"the local sandbox's holder (pid {holder.pid}) did not exit "
                                              "after SIGKILL.") from exc
