"""In-container supervisor of the docker sandbox (runs as the container's main process).

DockerSandbox starts it as ``python3 -c 'exec(os.environ.pop(...))'`` (named agentunit-supervisor) and talks to it over
the container's attached stdin/stdout: one JSON request a line in, one JSON reply a line
out. It is the trusted part of the container and the only one holding CAP_SYS_ADMIN:

* The agent sees the image through an overlay (lower: the read-only container root, upper:
  a tmpfs) mounted at ROOT, and runs chrooted there with SYS_ADMIN, SYS_CHROOT and SETPCAP
  removed from its capability bounding set, so it can neither remount nor leave the chroot.
* ``reset`` kills every process but PID 1 (docker-init) and this one, drops the overlay's
  upper tmpfs, mounts a fresh overlay and a fresh /dev, and starts a new shell: the
  filesystem is exactly the image's again, whatever the agent did (``rm -rf /`` included).
* The agent's shell is one interactive bash on a pty (:class:`Shell`), driven by the
  state machine shared with the local sandbox (``shell_driver.py``, on the protocol of
  ``shell_protocol.py``): commands framed by sentinels, shells that nest, timeouts; output
  past ``max`` bytes is read and discarded here, so it never crosses the socket. DockerSandbox
  sends those files too: the boot line installs them under their package names before running
  this one, so the imports below read the same in the container and on the host.

Standard library only (the image has python3); no third-party imports.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
import tty
from typing import Any

from agentunit_gym.images.os.shell_driver import ShellDriver
from agentunit_gym.images.os.shell_protocol import (
    AGENT_OOM_SCORE_ADJ,
    DEFAULT_RUNAWAY_BUDGET,
    Capture,
    Level,
    at_pids_limit,
    flush_terminal_input,
    is_flood,
    proc_stat,
    read_counter,
)

ROOT = "/run/au/root"
UPPER = "/run/au/upper"
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# Capabilities the agent must not hold (numbers from linux/capability.h).
CAP_SETPCAP, CAP_SYS_CHROOT, CAP_SYS_ADMIN = 8, 18, 21
PR_CAPBSET_DROP = 24
PR_SET_NAME = 15
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MNT_DETACH = 2
AGENT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash",
    "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb", "PS1": "", "PS2": "", "PS4": "+ ",
    # Output is a terminal: without these, git log or man would wait in a pager until the timeout.
    "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat",
}

libc = ctypes.CDLL(None, use_errno=True)
TMPFS_SIZE = os.environ.get("AU_TMPFS_SIZE", "1g")
PIDS_LIMIT = int(os.environ.get("AU_PIDS_LIMIT", "256"))
NETWORK = os.environ.get("AU_NETWORK") == "1"
"""With a network, the agent's /etc gets Docker's resolv.conf, hosts and hostname (the
overlay shows the image's files, not the ones Docker mounts over them)."""
RUNAWAY_BUDGET = int(os.environ.get("AU_RUNAWAY_BUDGET", str(DEFAULT_RUNAWAY_BUDGET)))
"""The sandbox's ``runaway_budget`` (see :func:`shell_protocol.is_flood`)."""


def _mount(src: str, target: str, fstype: str, flags: int = 0, data: str = "") -> None:
    if libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                  data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} on {target}: {os.strerror(err)}")


def _umount(target: str) -> None:
    if libc.umount2(target.encode(), MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def mount_root() -> None:
    """A fresh overlay of the image at ROOT with its own /dev, and /proc, /sys from the container."""
    _umount(ROOT)
    _umount(UPPER)
    os.makedirs(UPPER, exist_ok=True)
    os.makedirs(ROOT, exist_ok=True)
    _mount("tmpfs", UPPER, "tmpfs", MS_NOSUID | MS_NODEV, f"size={TMPFS_SIZE},mode=755")
    os.mkdir(UPPER + "/u", 0o755)
    os.mkdir(UPPER + "/w", 0o755)
    _mount("overlay", ROOT, "overlay", 0, f"lowerdir=/,upperdir={UPPER}/u,workdir={UPPER}/w")
    _mount("/proc", ROOT + "/proc", "", MS_BIND | MS_REC)
    _mount("/sys", ROOT + "/sys", "", MS_BIND | MS_REC)
    try:  # read-only sysfs for the agent; best effort (docker already mounts it read-only)
        _mount("", ROOT + "/sys", "", MS_REMOUNT | MS_BIND | MS_RDONLY)
    except OSError:
        pass
    # A private /dev: files the agent creates there must not survive a reset, so it is a
    # tmpfs holding bind mounts of the few device nodes, not a bind of the container's /dev.
    dev = ROOT + "/dev"
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "size=1m,mode=755")
    for node in DEV_NODES:
        open(dev + "/" + node, "w").close()
        _mount("/dev/" + node, dev + "/" + node, "", MS_BIND)
    os.mkdir(dev + "/pts")
    _mount("/dev/pts", dev + "/pts", "", MS_BIND)
    os.symlink("pts/ptmx", dev + "/ptmx")
    os.mkdir(dev + "/shm", 0o1777)
    _mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, dev + "/" + name)
    if NETWORK:
        for name in ("resolv.conf", "hosts", "hostname"):
            try:
                with open("/etc/" + name, "rb") as src:
                    data = src.read()
                with open(ROOT + "/etc/" + name, "wb") as dst:
                    dst.write(data)
            except OSError:
                pass


SHIELDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""Signals the supervisor ignores (an agent's ``kill -TERM -1`` or ``pkill -f``); children get them back."""


CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000


def new_pid_namespace() -> None:
    """Make our next children the first processes of a new pid namespace (the agent's).

    The agent's shell becomes its PID 1, as in ``docker run IMAGE bash``: docker-init and
    this supervisor are not in its view, and every ``/proc`` entry it sees is its own (so
    ``find /`` meets no unreadable ones). One-off commands (``run()``) are born into the
    same namespace, so init scripts' daemons and checks see what the agent sees. Our own
    namespace is first made the one for children again: a second ``unshare`` is refused
    while they point elsewhere.
    """
    own = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        if libc.setns(own, CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "setns to our own pid namespace")
    finally:
        os.close(own)
    if libc.unshare(CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare a pid namespace for the agent")


def _enter_jail(controlling_tty: bool) -> None:
    """In the child, before exec: chroot into the overlay and give up the dangerous caps.

    The shell (``controlling_tty``) is PID 1 of the agent's pid namespace: it mounts that
    namespace's own ``/proc`` over the container's first."""
    for sig in SHIELDED:  # ignored signals survive exec: give the agent's processes the defaults
        signal.signal(sig, signal.SIG_DFL)
    try:  # [limits] see AGENT_OOM_SCORE_ADJ
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write(str(AGENT_OOM_SCORE_ADJ))
    except OSError:
        pass
    if controlling_tty:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        _mount("proc", ROOT + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chroot(ROOT)
    os.chdir("/root" if os.path.isdir("/root") else "/")
    for cap in (CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_SETPCAP):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:  # never run the agent with them
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    # Root's capabilities after exec are its bounding set: the dropped caps are gone.


OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
"""Where the container's count of out-of-memory kills is (cgroup v2, v1)."""


CPU_STATS = ("/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpu/cpu.stat", "/sys/fs/cgroup/cpu,cpuacct/cpu.stat")
"""Where the container's count of CPU-throttled periods is (cgroup v2, v1)."""


PIDS_EVENTS = ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events")
"""Where the container's count of forks its pids limit refused is (cgroup v2, v1)."""


def pids_refused() -> int:
    """How many forks the container's pids limit has refused so far; -1: unknown."""
    return read_counter(PIDS_EVENTS, "max")


def cpu_throttled() -> int:
    """In how many CPU periods the container's ``cpus`` limit has held it still so far; -1: unknown."""
    return read_counter(CPU_STATS, "nr_throttled")


def oom_kills() -> int:
    """How many processes the kernel killed at the container's memory limit so far; -1: unknown."""
    return read_counter(OOM_COUNTERS, "oom_kill")


def other_pids() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(deadline_s: float = 3.0) -> bool:
    """SIGKILL every process except PID 1 and us until none is left; False if some survive."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # one syscall: also stops fork bombs (fork fails with a fatal signal pending)
        except ProcessLookupError:
            pass
        reap()
        left = other_pids()
        if not left:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.001)


def contain_runaways(before: set[int], spared: set[int], refused_before: int = -1) -> int:
    """Kill what the last command left running when it is a flood (:func:`shell_protocol.is_flood`):
    every process not in ``before`` (earlier jobs survive), in rounds, then, when the box is
    still at its pids limit (an earlier command's bomb), everything but ``spared``.
    ``refused_before``: :func:`pids_refused` as the command started (-1: unknown). Returns how
    many processes were killed."""
    refused = (lambda: pids_refused() - refused_before) if refused_before >= 0 else None
    if not at_pids_limit(len(other_pids()), PIDS_LIMIT) and not is_flood(
            lambda: len(_left(before, spared)), len(before), RUNAWAY_BUDGET, PIDS_LIMIT,
            throttled=cpu_throttled if cpu_throttled() >= 0 else None, refused=refused):
        return 0
    killed = _kill_rounds(before, spared)
    if at_pids_limit(len(other_pids()), PIDS_LIMIT):
        killed += _kill_rounds(set(), spared)
    return killed


def _left(before: set[int], spared: set[int]) -> list[int]:
    return [pid for pid in other_pids() if pid not in before and pid not in spared]


def _kill_rounds(before: set[int], spared: set[int]) -> int:
    """Kill every process not in ``before`` or ``spared``, their groups at once, until none is left."""
    new = _left(before, spared)
    killed: set[int] = set()
    end = time.monotonic() + 3.0
    while new and time.monotonic() < end:
        for pid in new:
            try:
                group = os.getpgid(pid)
                if group not in spared:
                    os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            killed.add(pid)
        reap()
        new = _left(before, spared)
    reap()
    return len(killed)


def reply(cap: Capture, **extra: Any) -> dict[str, Any]:
    """The JSON reply for a command whose output ``cap`` holds."""
    out: dict[str, Any] = {"out": base64.b64encode(bytes(cap.kept)).decode(), "total": cap.total,
                           "truncated": cap.truncated}
    out.update(extra)
    return out


class Shell:
    """The agent's interactive bash on a pty (its controlling terminal, stdin and output): the
    transport of the shared :class:`~shell_driver.ShellDriver` (``driver``), which sends the
    commands, follows nested shells and stops what hangs.

    Job control puts each command in its own process group, which a timeout finds with
    ``tcgetpgrp`` and kills; a command reading stdin (``cat``) waits as in a terminal. As in
    AgentBench's shell, commands see a terminal on stdout (``ls`` quotes names with spaces);
    the pty is raw, so newlines arrive unchanged and nothing is echoed.
    """

    pipe = None  # the outer bash reads the terminal too
    runaway_budget = RUNAWAY_BUDGET

    def __init__(self) -> None:
        new_pid_namespace()  # the shell is PID 1 there; when it ends, everything of the episode ends
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no CR/LF translation: bytes pass through unchanged
        self.master = master
        self.slave_name = os.ttyname(slave)
        try:
            self.proc = subprocess.Popen(
                ["/bin/bash", "--noprofile", "--norc", "--noediting", "-i"],
                stdin=slave, stdout=slave, stderr=slave, env=AGENT_ENV, close_fds=True,
                start_new_session=True, preexec_fn=lambda: _enter_jail(True),
            )
        finally:
            os.close(slave)
        fcntl.fcntl(master, fcntl.F_SETFL, os.O_NONBLOCK)
        self._refusals = -1
        self.driver = ShellDriver(self, Level(self.proc.pid, "bash"))
        if self.driver.roundtrip("set +H +o history; unset HISTFILE MAILCHECK PROMPT_COMMAND", 5.0) is None:
            raise RuntimeError("the agent shell did not start")

    def close(self) -> None:
        self.kill(self.proc.pid, signal.SIGKILL, group=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        with contextlib.suppress(OSError):
            os.close(self.master)

    def run(self, command: str, timeout: float, limit: int, watch: bool = True) -> dict[str, Any]:
        """One command of the agent, as the host's reply (``restarted``: replace this shell);
        ``watch`` False for the task's start script (what it leaves is not judged a flood)."""
        started = time.monotonic()
        kills = oom_kills()  # [limits] the host adds a note when the kernel killed at the memory limit
        self._refusals = pids_refused()
        report = self.driver.run(command, timeout, limit, watch=watch)
        return reply(report.capture, exit=report.exit_code, timed_out=report.timed_out,
                     restarted=report.ended is not None, duration=time.monotonic() - started,
                     oom=kills >= 0 and oom_kills() > kills)

    def clear_full_box(self) -> None:
        """Before a one-off command: kill what holds the box at its pids limit (silently: the
        command's output is the caller's), and what it printed."""
        if at_pids_limit(len(other_pids()), PIDS_LIMIT) and _kill_rounds(set(), self.spared(self.driver.levels)):
            self.driver.discard_pending()

    def spared(self, levels: list[Level]) -> set[int]:
        """Our shells, the processes between them (``su``), and our own group: never runaways."""
        if len(levels) == 1:  # the common case, without reading /proc
            return {self.proc.pid, os.getpgid(0)}
        spared = {os.getpgid(0)}
        for level in levels:
            pid = level.pid
            while pid > 1 and pid not in spared:
                spared.add(pid)
                fields = proc_stat(pid)
                pid = int(fields[1]) if fields else 0
        return spared

    # ------------------------------------------------------------------ the driver's transport

    def write_terminal(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view):]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError("the terminal does not take input") from None
                select.select([], [self.master], [], 0.05)

    def read(self, wait: float) -> bytes | None:
        ready, _, _ = select.select([self.master], [], [], max(0.0, wait))
        if not ready:
            return b"" if self.proc.poll() is not None else None
        try:
            return os.read(self.master, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:  # EIO: every holder of the pty's slave side is gone
            return b""

    def foreground_group(self) -> int | None:
        try:
            return os.tcgetpgrp(self.master)
        except OSError:
            return None

    def ours(self) -> set[int]:
        return set()

    def kill(self, pid: int, sig: int, *, group: bool) -> None:
        with contextlib.suppress(OSError):
            (os.killpg if group else os.kill)(pid, sig)

    def flush_input(self) -> None:
        flush_terminal_input(self.slave_name)

    def processes(self) -> set[int]:
        return set(other_pids())

    def contain_runaways(self, before: set[int], levels: list[Level]) -> int:
        return contain_runaways(before, self.spared(levels), self._refusals)

    def exit_status(self) -> int | None:
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code  # killed by a signal: report it the way bash would


def run_once(argv: list[str], stdin: bytes | None, timeout: float, limit: int) -> dict[str, Any]:
    """A one-off process in the jail as root, its own session; killed (group) at the deadline."""
    started = time.monotonic()
    env = dict(AGENT_ENV)
    env.pop("PS1")
    env.pop("PS2")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, close_fds=True,
                            start_new_session=True, preexec_fn=lambda: _enter_jail(False))
    pipe_in, pipe_out = proc.stdin, proc.stdout
    if pipe_out is None:
        raise RuntimeError("no output pipe")
    # stdin is fed from the loop below, as the process takes it: one that does not read its
    # stdin must not block us past the deadline. (Not from a thread: after unshare(CLONE_NEWPID)
    # this process may not create threads.)
    in_fd, pending = -1, memoryview(stdin or b"")
    if stdin is not None and pipe_in is not None:
        in_fd = pipe_in.fileno()
        os.set_blocking(in_fd, False)
        if not pending:
            pipe_in.close()
            in_fd = -1
    cap = Capture(limit)
    fd = pipe_out.fileno()
    deadline = started + timeout
    timed_out = False
    # A pidfd turns readable when the process exits: a background child still holding the
    # pipe (an init script's daemon) must not keep us waiting. Without pidfds, poll often.
    try:
        exit_fd = os.pidfd_open(proc.pid)
        watched, slice_s = [fd, exit_fd], 1.0
    except (AttributeError, OSError):
        exit_fd, watched, slice_s = -1, [fd], 0.005
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, writable, _ = select.select(watched, [in_fd] if in_fd >= 0 else [], [], min(left, slice_s))
            if writable:
                try:
                    pending = pending[os.write(in_fd, pending[:1 << 16]):]
                except OSError:  # it closed its stdin or exited: the rest is not wanted
                    pending = pending[:0]
                if not pending:
                    assert pipe_in is not None
                    pipe_in.close()
                    in_fd = -1
            if fd in ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                cap.feed(data)
            elif exit_fd in ready or proc.poll() is not None:
                break  # exited: what it wrote is in the pipe, drained below
    finally:
        if exit_fd >= 0:
            os.close(exit_fd)
        if in_fd >= 0 and pipe_in is not None:
            try:
                pipe_in.close()
            except OSError:
                pass
    if not timed_out:
        # EOF comes just before exit: wait for it. Background children the command started
        # (an init script's daemon) are left running, as in a terminal.
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    code = proc.wait()
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK)
    try:
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            cap.feed(data)
    except BlockingIOError:
        pass
    pipe_out.close()
    return reply(cap, exit=None if timed_out else code, timed_out=timed_out, restarted=False,
                     duration=time.monotonic() - started)


class Supervisor:
    """Holds the agent's shell and answers the host's requests."""

    def __init__(self) -> None:
        self.shell: Shell | None = None

    def fresh(self) -> dict[str, Any]:
        """Kill everything, remount the overlay, start a shell; False when that cannot be proven."""
        if self.shell is not None:
            self.shell.close()
            self.shell = None
        t0 = time.monotonic()
        if not kill_all():
            return {"ok": False, "error": f"processes survived SIGKILL: {other_pids()[:10]}"}
        # A new IPC namespace for the episode's processes: System V shared memory, semaphores and
        # message queues of the last one go with its namespace, which nothing holds any more.
        if libc.unshare(CLONE_NEWIPC) != 0:
            return {"ok": False, "error": f"cannot make a new IPC namespace: {os.strerror(ctypes.get_errno())}"}
        # The agent's /dev/pts is the container's (its terminals are ours): put back what root
        # could change there, the mode and owner of ptmx.
        try:
            os.chown("/dev/pts/ptmx", 0, 0)
            os.chmod("/dev/pts/ptmx", 0o666)
        except OSError:
            pass
        t1 = time.monotonic()
        mount_root()
        t2 = time.monotonic()
        self.shell = Shell()
        t3 = time.monotonic()
        return {"ok": True, "ms": {"kill": (t1 - t0) * 1e3, "mount": (t2 - t1) * 1e3, "shell": (t3 - t2) * 1e3}}

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "ping":
            return {"ok": True, "pids": len(other_pids())}
        if op == "reset":
            return self.fresh()
        if op == "shell":
            if self.shell is None:
                return {"error": "no shell: the last reset failed"}
            result = self.shell.run(req["cmd"], float(req["timeout"]), int(req["max"]), watch=not req.get("setup"))
            if result["restarted"]:
                self.shell.close()
                self.shell = Shell()
            return result
        if op == "run":
            if self.shell is not None:
                self.shell.clear_full_box()  # a box the agent left full could not run it
            stdin = base64.b64decode(req["stdin"]) if req.get("stdin") is not None else None
            return run_once(req["argv"], stdin, float(req["timeout"]), int(req["max"]))
        return {"error": f"unknown op {op!r}"}


def main() -> int:
    libc.prctl(PR_SET_NAME, b"agentunit-sup", 0, 0, 0)  # not "python3": see DockerSandbox
    for sig in SHIELDED:
        signal.signal(sig, signal.SIG_IGN)
    out = sys.stdout.buffer
    sup = Supervisor()

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    try:
        state = sup.fresh()
    except Exception as exc:  # noqa: BLE001 - any setup failure goes to the host, which raises a typed error
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    send(dict(state, ready=state.get("ok", False)))
    for raw in sys.stdin.buffer:
        req = None
        try:
            req = json.loads(raw)
            reply = sup.handle(req)
        except Exception as exc:  # noqa: BLE001 - a failure of ours: the host turns it into BackendError
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        reply["id"] = req.get("id") if isinstance(req, dict) else None
        send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
