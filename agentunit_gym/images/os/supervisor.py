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
* The agent's shell is one interactive bash on a pty (job control: every command is its own
  process group, which a timeout kills with ``killpg``). Each command is sent as one line
  ``eval $'...'; printf '<RS>AU<nonce>:%d<RS>' $?`` and its output read up to that sentinel;
  output past ``max`` bytes is read and discarded here, so it never crosses the socket.

Standard library only (the image has python3); no third-party imports.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import fcntl
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import tty
from typing import Any

ROOT = "/run/au/root"
UPPER = "/run/au/upper"
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# Capabilities the agent must not hold (numbers from linux/capability.h).
CAP_SETPCAP, CAP_SYS_CHROOT, CAP_SYS_ADMIN = 8, 18, 21
PR_CAPBSET_DROP = 24
PR_SET_NAME = 15
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
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
RUNAWAY_BUDGET = int(os.environ.get("AU_RUNAWAY_BUDGET", "32"))
"""How many processes one command may leave running (a server, a few workers) before they
count as runaways (a fork bomb) and are killed, so the next command can fork."""
RUNAWAY_WATCH_S = 0.2
"""How long we watch what a command left behind while it keeps growing."""


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


def _enter_jail(controlling_tty: bool) -> None:
    """In the child, before exec: chroot into the overlay and give up the dangerous caps."""
    for sig in SHIELDED:  # ignored signals survive exec: give the agent's processes the defaults
        signal.signal(sig, signal.SIG_DFL)
    if controlling_tty:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    os.chroot(ROOT)
    os.chdir("/root" if os.path.isdir("/root") else "/")
    for cap in (CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_SETPCAP):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:  # never run the agent with them
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    # Root's capabilities after exec are its bounding set: the dropped caps are gone.


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


def contain_runaways(before: set[int], spared: set[int]) -> int:
    """Kill what the last command left running when it is a flood (see :data:`RUNAWAY_BUDGET`).

    ``before``: the processes that existed before the command (earlier background jobs
    survive). What the command left is watched while it grows (a fork bomb doubles every
    few ms; a server started with ``&`` stays put); past the budget, or with the pids
    limit nearly reached, every process the command created is killed, in rounds until
    none is left (killing a process group at once stops its members forking). Returns how
    many processes were killed.
    """
    deadline = time.monotonic() + RUNAWAY_WATCH_S
    seen = 0
    while True:
        new = [pid for pid in other_pids() if pid not in before and pid not in spared]
        if not new:
            return 0
        if len(new) > RUNAWAY_BUDGET or len(new) + len(before) >= PIDS_LIMIT * 9 // 10:
            break
        if len(new) <= seen or time.monotonic() > deadline:
            return 0  # stable (or slow): a deliberate background job
        seen = len(new)
        time.sleep(0.01)
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
        new = [pid for pid in other_pids() if pid not in before and pid not in spared]
    reap()
    return len(killed)


class Capture:
    """Keeps the first ``limit`` bytes of a stream, counts the rest, and finds a sentinel."""

    def __init__(self, limit: int, sentinel: bytes | None = None) -> None:
        self.limit, self.sentinel = limit, sentinel
        self.kept = bytearray()
        self.total = 0
        self.pending = b""  # bytes held back because they may be the start of the sentinel
        self.found: int | None = None  # exit code once the sentinel was seen

    def _take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def feed(self, data: bytes) -> None:
        if self.sentinel is None:
            self._take(data)
            return
        data = self.pending + data
        self.pending = b""
        at = data.find(self.sentinel)
        if at >= 0:
            end = data.find(b"\x1e", at + len(self.sentinel))
            if end >= 0:
                self._take(data[:at])
                digits = data[at + len(self.sentinel):end]
                self.found = int(digits) if digits.isdigit() else -1
                return
            self.pending = data[at:]
            self._take(data[:at])
            return
        keep = len(self.sentinel) + 8
        cut = max(0, len(data) - keep)
        # Hold back a tail only if it could begin the sentinel.
        tail = data[cut:]
        start = tail.find(b"\x1e")
        if start >= 0:
            cut += start
        else:
            cut = len(data)
        self._take(data[:cut])
        self.pending = data[cut:]

    def note(self, text: str) -> None:
        """Append a line of ours to what the agent reads (counted like output)."""
        self._take(text.encode())

    def finish(self) -> None:
        if self.pending:
            self._take(self.pending)
            self.pending = b""

    def reply(self, **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"out": base64.b64encode(bytes(self.kept)).decode(), "total": self.total,
               "truncated": self.total > len(self.kept)}
        out.update(extra)
        return out


class Shell:
    """The agent's interactive bash on a pty (its controlling terminal, stdin and output).

    Job control puts each command in its own process group, which a timeout finds with
    ``tcgetpgrp`` and kills; a command reading stdin (``cat``) waits as in a terminal. As in
    AgentBench's shell, commands see a terminal on stdout (``ls`` quotes names with spaces);
    the pty is raw, so newlines arrive unchanged and nothing is echoed.
    """

    def __init__(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no CR/LF translation: bytes pass through unchanged
        self.master = master
        try:
            self.proc = subprocess.Popen(
                ["/bin/bash", "--noprofile", "--norc", "--noediting", "-i"],
                stdin=slave, stdout=slave, stderr=slave, env=AGENT_ENV, close_fds=True,
                start_new_session=True, preexec_fn=lambda: _enter_jail(True),
            )
        finally:
            os.close(slave)
        fcntl.fcntl(master, fcntl.F_SETFL, os.O_NONBLOCK)
        code, _, _ = self._roundtrip("set +H +o history; unset HISTFILE MAILCHECK PROMPT_COMMAND", 5.0, 4096)
        if code is None:
            raise RuntimeError("the agent shell did not start")

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.close(self.master)
        except OSError:
            pass

    def _read_until(self, cap: Capture, deadline: float) -> str:
        """Read into ``cap`` until its sentinel shows, the deadline passes, or the shell dies."""
        while cap.found is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.05))
            if not ready:
                if self.proc.poll() is not None:
                    return "dead"
                continue
            try:
                data = os.read(self.master, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:  # EIO: every holder of the pty's slave side is gone
                return "dead"
            if not data:
                return "dead"
            cap.feed(data)
        return "done"

    def _roundtrip(self, command: str, timeout: float, limit: int) -> tuple[int | None, Capture, str]:
        nonce = secrets.token_hex(8)
        sentinel = f"\x1eAU{nonce}:".encode()
        # One line, so bash has all of it before the command runs: a command reading stdin
        # cannot swallow the sentinel's printf. (Not a ``{ ...; }`` group: after a syntax
        # error inside eval, bash 5.2 then misparses the next line.)
        line = f"eval {quote(command)}; builtin printf '\\036AU{nonce}:%d\\036' $?\n"
        cap = Capture(limit, sentinel)
        os.write(self.master, line.encode("utf-8", "surrogateescape"))
        state = self._read_until(cap, time.monotonic() + timeout)
        return cap.found, cap, state

    def _discard_pending(self) -> None:
        """Drop output waiting on the terminal (it would open the next command's output)."""
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.02)
            if not ready:
                return
            try:
                if not os.read(self.master, 1 << 16):
                    return
            except OSError:
                return

    def _kill_foreground(self, sig: int) -> bool:
        """Signal the terminal's foreground process group unless it is the shell's own."""
        try:
            group = os.tcgetpgrp(self.master)
            if group != self.proc.pid:
                os.killpg(group, sig)
                return True
        except OSError:
            pass
        return False

    def run(self, command: str, timeout: float, limit: int) -> dict[str, Any]:
        started = time.monotonic()
        before = set(other_pids())
        code, cap, state = self._roundtrip(command, timeout, limit)
        timed_out = state == "timeout"
        restarted = False
        if timed_out:
            # 1: kill the foreground process group; the line's printf then reports.
            if self._kill_foreground(signal.SIGKILL):
                state = self._read_until(cap, time.monotonic() + 0.5)
            if state != "done":
                # 2: the shell itself is busy (a loop: builtins, or commands it keeps starting).
                # Ctrl-C: SIGINT to the foreground group and the shell, which abandons the line;
                # then resync with an empty command (a few tries, in case the signal lands late).
                cap.finish()
                for _ in range(3):
                    self._kill_foreground(signal.SIGINT)
                    try:
                        os.kill(self.proc.pid, signal.SIGINT)
                    except OSError:
                        break
                    time.sleep(0.05)
                    _, _, state = self._roundtrip(":", 1.0, 0)
                    if state == "done":
                        break
            if state != "done":
                restarted = True  # 3: the shell is unusable (or was replaced by the agent)
        if state == "dead":
            restarted = True
            try:
                code = self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None and code < 0:
                code = 128 - code  # killed by a signal: report it the way bash would
        cap.finish()
        if not restarted:
            killed = contain_runaways(before, {self.proc.pid, os.getpgid(0)})
            if killed:
                self._discard_pending()  # what the killed processes printed ("fork: retry: ...")
                cap.note(f"\n[{killed} processes this command left running were killed: more than "
                         f"{RUNAWAY_BUDGET} were still forking]\n")
        return cap.reply(exit=None if timed_out else code, timed_out=timed_out, restarted=restarted,
                         duration=time.monotonic() - started)


def quote(text: str) -> str:
    """Bash ANSI-C quoting on one line: the whole command reaches bash before it runs."""
    out = ["$'"]
    for byte in text.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        if ch == "'" or ch == "\\":
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    out.append("'")
    return "".join(out)


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
    if stdin is not None and pipe_in is not None:
        # Fed from a thread: a process that does not read its stdin must not block us past
        # the deadline (it is killed then, and the write fails with a broken pipe).
        def feed(pipe: Any = pipe_in) -> None:
            try:
                pipe.write(stdin)
                pipe.close()
            except OSError:
                pass

        threading.Thread(target=feed, daemon=True).start()
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
            ready, _, _ = select.select(watched, [], [], min(left, slice_s))
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
    return cap.reply(exit=None if timed_out else code, timed_out=timed_out, restarted=False,
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
            result = self.shell.run(req["cmd"], float(req["timeout"]), int(req["max"]))
            if result["restarted"]:
                self.shell.close()
                self.shell = Shell()
            return result
        if op == "run":
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
