"""The host's side of the one-off spawner (:mod:`.spawner_main`): start it in a box, hand it
commands, and follow a command it started as a ``Popen`` would be followed.

A one-off through the exec chain costs five execs (the cgroup join, ``setpriv``,
``nsenter``, ``setpriv``, the command), each ~1 ms of CPU on a VM whose glibc probes the CPU
at every start; through the spawner it costs one exec: the spawner starts the command
itself (a vfork, on Python 3.11+), or a fork of the small spawner execs it. Where the
spawner cannot run (no Python 3.9+ at ``/usr/bin/python3``, the box out of processes, the
spawner killed, or held in the middle of a start), the sandbox uses the chain: same result,
slower.

A spawner that dies (killed from outside, the OOM killer) leaves what it started to the host:
a command whose pidfd the host has is killed through it; one it had started but not yet
handed over (it runs from its exec, the pidfd is sent after) is found as what the spawner
left: its children go to the init of its pid namespace, the box's, when it dies
(:meth:`Spawner.kill_orphans`).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from agentunit_gym.backends.sandbox.base import AGENT_CAPABILITIES
from agentunit_gym.backends.sandbox.local.procfs import _children_ints, _proc_stat_fields

ORPHANS_WAIT_S = 5.0
"""How long, at least, the host waits for a dead spawner to be reaped before it looks for what
it left (its channel closes at its exit before its children are handed on; a few ms)."""
PYTHON = "/usr/bin/python3"
"""The spawner's interpreter, inside the box: the host's system Python, bound read-only."""
SOURCE = (Path(__file__).parent / "spawner_main.py").read_text(encoding="utf-8")

CAPABILITY_NUMBERS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
    "SETUID": 7, "SETPCAP": 8, "LINUX_IMMUTABLE": 9, "NET_BIND_SERVICE": 10, "NET_BROADCAST": 11,
    "NET_ADMIN": 12, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31,
}
"""Linux's numbers (``linux/capability.h``) of the capabilities a box may keep."""
_AGENT_CAPS = sorted(CAPABILITY_NUMBERS[name] for name in AGENT_CAPABILITIES)


class SpawnerUnavailable(Exception):
    """The spawner did not take the command (nothing was started): run it through the chain."""

    def __init__(self, reason: str, *, gone: bool) -> None:
        super().__init__(reason)
        self.gone = gone
        """True when the spawner itself is gone (not only this command refused)."""


def _recv(sock: socket.socket, deadline: float, fds: int = 0) -> tuple[bytes, list[int]] | None:
    """One message (and up to ``fds`` fds) from ``sock``, or None at ``deadline``."""
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        if not sel.select(max(0.0, deadline - time.monotonic())):  # 0: a look without waiting
            return None
    msg, got, _, _ = socket.recv_fds(sock, 1 << 16, max(fds, 1))
    extra = got[fds:]
    for fd in extra:  # never more than asked for: the box's side is not trusted to send them
        os.close(fd)
    return msg, got[:fds]


def _send(sock: socket.socket, message: bytes, fds: list[int], deadline: float) -> bool:
    """Send one message with ``fds``; False when ``sock`` takes nothing before ``deadline``."""
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_WRITE)
        while True:
            try:
                socket.send_fds(sock, [message], fds)
                return True
            except BlockingIOError:
                if not sel.select(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    return False


def _exit_code(msg: bytes, word: bytes) -> int | None:
    """``<word> <int>`` read from a message, or None when it is not one."""
    head, _, value = msg.partition(b" ")
    if head != word:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _host_pid(pidfd: int) -> int:
    """The pid, as the host sees it, of the process ``pidfd`` refers to."""
    for line in Path(f"/proc/self/fdinfo/{pidfd}").read_text().splitlines():
        if line.startswith("Pid:"):
            pid = int(line.split()[1])
            if pid > 1:
                return pid
    raise OSError("no live process behind the pidfd the spawner sent")


def _ended(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has ended (a pidfd reads ready then)."""
    with selectors.DefaultSelector() as sel:
        sel.register(pidfd, selectors.EVENT_READ)
        return bool(sel.select(0))


def _kill_group(pid: int | None, pidfd: int | None) -> None:
    """SIGKILL to the process group ``pid`` made (while it lives, that id is no other group's)
    and to the process itself through its pidfd (it may have left that group; a pidfd never
    reaches another process)."""
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    if pidfd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)


def _kill_orphan(pid: int, reaper: int, box_ns: int) -> None:
    """Kill ``pid`` and its group if it is a child of ``reaper`` in a pid namespace other than
    ``box_ns`` (what a dead spawner started). Checked after its pidfd is open, and while that
    says it runs: what was read is that process's, not a later one's with its pid."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone
    try:
        fields = _proc_stat_fields(pid)
        try:
            ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
        except OSError:
            return  # ended meanwhile (a zombie has no namespaces)
        if fields is None or int(fields[1]) != reaper or ns == box_ns or _ended(pidfd):
            return
        _kill_group(pid, pidfd)
    finally:
        os.close(pidfd)


class OneOff:
    """A one-off command the spawner started, followed as ``_exec`` follows a ``Popen``:
    ``pid`` (also its process group, on the host; None when it never ran), ``stdout``,
    ``poll()``, ``wait()``."""

    def __init__(self, pid: int | None, stdout: IO[bytes], channel: socket.socket, pidfd: int | None,
                 returncode: int | None = None) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode = returncode
        self._channel, self._pidfd = channel, pidfd

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(time.monotonic())
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.returncode is None:
            if not self._read(deadline):
                raise subprocess.TimeoutExpired("a one-off command", timeout)
        return self.returncode

    def _read(self, deadline: float) -> bool:
        try:
            got = _recv(self._channel, deadline)
        except OSError:
            got = (b"", [])
        if got is None:
            return False
        code = _exit_code(got[0], b"exit")
        if code is None:
            # The spawner died before it could say (killed), or said nonsense: the command
            # is no longer followed by anyone but us, so it goes (while its pidfd says it
            # runs: its pid, and so its group's id, is its own then), and reads as a kill would.
            if self._pidfd is not None and not _ended(self._pidfd):
                _kill_group(self.pid, self._pidfd)
            code = -9
        self.returncode = code
        return True

    def kill(self) -> None:
        """SIGKILL to its process group and to itself (through its pidfd); without its host
        pid, also through the spawner (our end of the channel shut: it kills the group and
        still reports the exit)."""
        _kill_group(self.pid, self._pidfd)
        if self.pid is None and self.returncode is None:
            with contextlib.suppress(OSError):
                self._channel.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._channel.close()
        if self._pidfd is not None:
            os.close(self._pidfd)


class Spawner:
    """One box's spawner process, and the socket to it."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket, reaper: int | None = None) -> None:
        self.proc, self._sock = proc, sock
        self.reaper = reaper
        """Host pid of the init of the spawner's pid namespace (the box's), which its children
        go to when it dies (None: not known, nothing is looked for; a fake spawner's tests)."""
        self.stalled = False
        """It said ``forking`` for a command and then nothing before the command's deadline:
        it is held in the middle of a start (the agent stopped the command before its exec,
        which holds a spawner that starts commands without a copy of itself)."""

    @classmethod
    def start(cls, spawn: Callable[[list[str], int], subprocess.Popen[bytes]], deadline: float, *,
              reaper: int) -> Spawner:
        """Start one with ``spawn(argv, fd)`` (the box's way in, passing ``fd`` on); it is up
        when it says so before ``deadline``. ``reaper``: the host pid of the init of the pid
        namespace it is started in (:attr:`reaper`).

        Raises:
            SpawnerUnavailable: it did not come up (no usable Python in the box).
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)  # sends wait with a deadline (_send)
        try:
            proc = spawn([PYTHON, "-I", "-S", "-B", "-c", SOURCE, str(theirs.fileno())], theirs.fileno())
        except Exception as exc:
            ours.close()
            raise SpawnerUnavailable(f"could not start it: {exc}", gone=True) from exc
        finally:
            theirs.close()
        spawner = cls(proc, ours, reaper)
        got = _recv(ours, deadline)
        if got is None or got[0] != b"ready":
            spawner.close()
            raise SpawnerUnavailable(f"it did not come up ({PYTHON} missing or older than 3.9?)", gone=True)
        return spawner

    def run(self, argv: Sequence[str], *, agent_init: int, cwd: str, env: dict[str, str], oom_score_adj: int | None,
            nproc: int | None, deadline: float) -> OneOff:
        """Start ``argv`` in the namespaces of ``agent_init`` (a host pid), in ``cwd``.

        Raises:
            SpawnerUnavailable: nothing was started (``gone`` if the spawner is gone too).
            subprocess.TimeoutExpired: it did not start by ``deadline`` (if it does later, it
                is killed at once: the spawner sees our end closed).
        """
        names = ("mnt", "ipc", "pid")
        opened: list[int] = []
        read_end, write_end = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = False
        try:
            try:
                opened += [os.open(f"/proc/{agent_init}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC) for name in names]
                opened.append(os.open(f"/proc/{agent_init}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
                opened.insert(0, os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
            except OSError as exc:
                raise SpawnerUnavailable(f"the agent's namespaces: {exc}", gone=False) from exc
            request = json.dumps({"argv": list(argv), "cwd": cwd, "env": env, "oom": oom_score_adj,
                                  "caps": _AGENT_CAPS, "nproc": nproc}).encode()
            try:
                sent = _send(self._sock, request, [theirs.fileno(), write_end, *opened], deadline)
            except OSError as exc:
                raise SpawnerUnavailable(f"it is gone: {exc}", gone=True) from exc
            if not sent:  # it takes no requests (stopped, or starved by the box's CPU limit)
                raise SpawnerUnavailable("it took no request before the deadline", gone=True)
            theirs.close()
            os.close(write_end)
            write_end = -1
            got = _recv(ours, deadline, fds=1)
            forked = got is not None and got[0] == b"forking"  # from here on it may have run
            if forked:
                got = _recv(ours, deadline, fds=1)
            if got is None:  # out of time; closing the channel kills it if it starts after all
                self.stalled = self.stalled or forked
                raise subprocess.TimeoutExpired(list(argv), 0.0)
            done = _exit_code(got[0], b"done")
            if done is not None:  # it could not run (its workdir is gone): its message is the output
                for fd in got[1]:
                    os.close(fd)
                started = True
                return OneOff(None, os.fdopen(read_end, "rb", buffering=0), ours, None, returncode=done)
            if got[0].startswith(b"error "):  # said only when nothing ran: the chain may run it
                for fd in got[1]:
                    os.close(fd)
                reason = got[0][6:].decode(errors="replace")[:300]
                raise SpawnerUnavailable(f"it did not start the command: {reason}", gone=False)
            if got[0] != b"started" or len(got[1]) != 1:
                for fd in got[1]:
                    os.close(fd)
                if not forked:  # the spawner died before it took the command: the chain runs it
                    raise SpawnerUnavailable("it died before it took the command", gone=True)
                # It died after its fork (or said nonsense): the command may have run, so it
                # is never run again; it reads as killed. Dead, it may have left it running
                # (from its exec to our pidfd of it): it is killed with what else it left.
                started = True
                if not got[0]:
                    self.kill_orphans(deadline)
                return OneOff(None, os.fdopen(read_end, "rb", buffering=0), ours, None, returncode=-9)
            pidfd = got[1][0]
            try:
                pid: int | None = _host_pid(pidfd)
            except (OSError, ValueError):
                pid = None  # it runs: followed, and killed, through the channel alone (OneOff.kill)
            started = True
            return OneOff(pid, os.fdopen(read_end, "rb", buffering=0), ours, pidfd)
        finally:
            for fd in opened:
                os.close(fd)
            if write_end >= 0:
                os.close(write_end)
            if not started:
                os.close(read_end)
                ours.close()
                theirs.close()

    def kill_orphans(self, deadline: float) -> None:
        """Kill what this spawner, found dead, left running (what it started: nobody follows
        it now). When it died, its children became children of :attr:`reaper`, each still in
        the agent's pid namespace (the box's own processes are in the box's): after its parent
        has reaped it (it has handed them on then; waited for until ``deadline``, and at least
        :data:`ORPHANS_WAIT_S`), each such child is killed with its process group."""
        if self.reaper is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=max(ORPHANS_WAIT_S, deadline - time.monotonic()))
        try:
            box_ns = os.stat(f"/proc/{self.reaper}/ns/pid").st_ino
        except OSError:
            return  # the box is gone, and everything that ran in it
        for pid in _children_ints(self.reaper):
            _kill_orphan(pid, self.reaper, box_ns)

    def close(self) -> None:
        """Close our end (the spawner then exits) and reap the process we started for it
        (``nsenter``, whose child it is; its box going down kills it). A stalled spawner is
        killed first: held in a start, it would not see the close."""
        if self.stalled:
            for pid in _children_ints(self.proc.pid):  # nsenter waits for it: the pid is the spawner's
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self._sock.close()
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5.0)
