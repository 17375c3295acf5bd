"""The one-off spawner's own program: it runs inside a local sandbox's box, as the box's root.

Started once per box (:mod:`.spawner` starts it, with ``python3 -I -S -B``), it starts each
one-off command (``run()``, the file helpers) into the agent's namespaces, so a one-off
costs one ``exec`` of the command itself instead of the five of the exec chain (the cgroup
join, ``setpriv``, ``nsenter``, ``setpriv`` again, the command). It lives in the box's own
pid and mount namespaces, which the agent's are children of: the agent cannot see it,
signal it or reach its socket (an unnamed socket pair with the host). A command's process
is in the agent's pid namespace from its start to its exec (well under a millisecond): the
agent may kill it, which fails that one command, or stop it, which holds a spawner that
started it itself (below) until it is killed.

Standard library only, and for any Python 3.9+: the box's ``python3`` is the host's system
one, not ours.

The protocol, on a ``SOCK_SEQPACKET`` socket whose fd is ``argv[1]``:

- the spawner says ``ready`` once it runs;
- a request is one JSON message (``argv``, ``cwd``, ``env``, ``oom``, ``caps``, ``nproc``)
  with seven fds: a channel socket for this command alone, the output pipe, ``/dev/null``,
  and the agent's mount, IPC and pid namespaces and root directory;
- the spawner sets the pid namespace of its children to the agent's (its own stays the
  box's) and starts the command one of two ways:

  - **from itself** (Python 3.11+, no ``nproc`` to set): at its first command it cuts its
    own bounding set to ``caps``, clears its ambient capabilities and sets no new
    privileges (it keeps its own capabilities: it still enters namespaces; a command gets
    ``caps`` at its exec). For each command it enters the agent's IPC and mount namespaces
    and root, raises its OOM score to ``oom``, starts the command with :mod:`subprocess`
    (a vfork: the child shares the spawner's memory until its exec and only makes its
    process group, changes to the workdir, sets its fds and the signals Python ignores
    back, then execs; nothing of the spawner is copied), and comes back to its own
    namespaces, root and score (it exits when it cannot: it never serves from the agent's).
    The child holds capabilities the agent lacks until its exec: the agent cannot trace
    it. The agent can stop it, which holds the spawner until the child is killed (the
    reset kills it with the agent's namespace): the host then sees ``forking`` and nothing
    more by the command's deadline, and drops the spawner for the chain;
  - **by a child** (older Python, or ``nproc``): a child of the spawner, forked into the
    agent's pid namespace, enters the other namespaces, sets itself up as the command must
    run (root directory, workdir, OOM score, no capabilities but ``caps``, no new
    privileges, the process limit, a process group of its own, signals as an exec from a
    shell leaves them) and execs the command: the child becomes it, so the copy of the
    spawner a fork makes lives only until that exec. The child tells the spawner how it
    went on a pipe that its exec closes; a child that has not exec'd in
    ``REPORT_TIMEOUT_S`` is killed;
- on the channel the spawner says ``forking`` just before its fork (or vfork), ``started``
  with the command's pidfd, then ``exit <code>`` when it ended (negative: killed by that
  signal); ``done <code>`` when the command could not run (its workdir is gone, or it
  cannot be executed: what it printed is in the output); or ``error <text>`` when nothing
  was started: said only when the command could not have been exec'd (the request was
  bad, the fork failed, the spawner could not enter the agent's namespaces, the child gave
  up before its exec and said so), for the host may then run it another way; anything
  that may have run reads as started, then killed at worst (a child past its deadline, or
  killed before its exec, ends as ``exit -9``): the host never runs a command twice;
- when the host closes the channel before the command ended (it gave up on it), the
  command's process group is killed: nothing the host does not follow keeps running; when
  the host closes the spawner's socket, every command still running (and every child not
  yet exec'd) is killed and the spawner exits. A spawner that dies (killed) closes the
  channels of what it started (a forked child closes its copies first thing, a command
  started directly holds none after its exec): the host
  then kills those commands itself (through the pidfd; a command it has no pidfd of yet,
  one that exec'd before ``started`` was sent, as a child the kernel gave to the box's
  init), and reads a channel closed without a word as a command killed, never as one to
  run again.
"""

import contextlib
import ctypes
import gc
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Any

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 38, 47, 4
FDS = 7
"""The fds of a request: channel, output, /dev/null, mount ns, IPC ns, pid ns, root."""
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)
REPORT_TIMEOUT_S = 10.0
"""How long a child may take to exec the command (it enters, sets up, execs: a few ms; the
agent can see it and stop it meanwhile: then it is killed, and only this command fails)."""
REAP_RETRY_S = 0.5
"""How often a command that ended is looked at again while a tracer (the agent) holds it."""


def _error(exc: BaseException) -> bytes:
    """``error <text>`` for ``exc``: said when nothing ran."""
    return b"error " + repr(exc).encode(errors="replace")[:4000]


def _check(ret: int, libc: ctypes.CDLL, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _become(req: dict[str, Any], fds: list[int], libc: ctypes.CDLL, last_cap: int, report: int) -> None:
    """In the child: enter, set up as the command must run, and exec it. Returns only when
    the command could not run; what happened is then on ``report`` (an exec closes it)."""
    _, out, null, mnt, ipc, _, root = fds
    if req.get("oom") is not None:  # the box's /proc: ours is not in the agent's
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(int(req["oom"])))
    _check(libc.setns(ipc, CLONE_NEWIPC), libc, "setns ipc")
    _check(libc.setns(mnt, CLONE_NEWNS), libc, "setns mnt")
    os.fchdir(root)
    os.chroot(".")
    try:
        os.chdir(req["cwd"])
    except OSError as exc:  # as nsenter says it, and exits 1: the command did not run
        os.write(out, f"nsenter: cannot open current working directory: {exc.strerror}\n".encode())
        os.write(report, b"done 1")
        return
    if req.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(req["nproc"]), int(req["nproc"])))
    keep = set(req["caps"])
    for cap in range(last_cap + 1):
        if cap not in keep:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), libc, "drop a capability")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), libc, "clear ambient capabilities")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), libc, "no new privileges")
    for sig in _DEFAULT_SIGNALS:  # what Python ignores and we wait on: as an exec from a shell leaves them
        signal.signal(sig, signal.SIG_DFL)
    os.setpgid(0, 0)  # a process group of its own, in our session (outside the agent's namespace, as nsenter's)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    argv = req["argv"]
    try:
        os.execvpe(argv[0], argv, req["env"])
    except OSError as exc:  # it did not run: as setpriv, the chain's last step, says it
        os.write(2, f"setpriv: failed to execute {argv[0]}: {exc.strerror}\n".encode(errors="replace"))
        os.write(report, b"done %d" % (127 if isinstance(exc, FileNotFoundError) else 126))


def _send(channel: socket.socket, message: bytes, fds: tuple[int, ...] = ()) -> None:
    try:
        socket.send_fds(channel, [message], list(fds)) if fds else channel.send(message)
    except OSError:
        pass  # the host gave up on it


def _closed(channel: socket.socket) -> bool:
    """Whether the host has closed its end already (it never writes on a channel)."""
    try:
        return channel.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class _Command:
    """One command the spawner forked: its child until the exec, then the command itself."""

    def __init__(self, pid: int, pidfd: int, channel: socket.socket, report: "int | None") -> None:
        self.pid, self.pidfd, self.channel = pid, pidfd, channel
        # (Annotations in a function body are never evaluated: `int | None` is fine on 3.9.)
        self.report: int | None = report  # the child's report pipe, until its exec closes it
        self.said = b""  # what the child wrote there: it did not run
        self.deadline = time.monotonic() + REPORT_TIMEOUT_S  # for the report
        self.started = False  # "started" was sent: only its end is said from then on
        self.reap_at: float | None = None  # ended but not reapable yet (a tracer holds it)


class _Spawner:
    """The spawner's loop, which never waits on one command: requests on ``sock``; for each
    command, the child's report (with a deadline), its pidfd (its end, said on its channel)
    and its channel (closed by the host before the end: the command is killed)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/sys/kernel/cap_last_cap") as f:
            self.last_cap = int(f.read())
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, ("request", None))
        self.commands: set[_Command] = set()
        self.orphans: set[int] = set()  # killed children nobody follows: reaped when they end
        # Python 3.11+ starts a command without a copy of us (vfork, process_group): our own
        # namespaces, root and OOM score to come back to after each start (_start_direct).
        self.direct = sys.version_info >= (3, 11)
        flags = os.O_RDONLY | os.O_CLOEXEC
        self.own = (os.open("/proc/self/ns/ipc", flags), os.open("/proc/self/ns/mnt", flags),
                    os.open("/", flags | os.O_DIRECTORY))
        self.oom_fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
        self.own_oom = os.pread(self.oom_fd, 32, 0).strip()
        self.bounded: frozenset[int] | None = None  # what our bounding set keeps, once cut

    def serve(self) -> None:
        while True:
            waits = [c.deadline for c in self.commands if c.report is not None and c.deadline < float("inf")]
            waits += [c.reap_at for c in self.commands if c.reap_at is not None]
            waits += [time.monotonic() + REAP_RETRY_S] if self.orphans else []
            timeout = max(0.0, min(waits) - time.monotonic()) if waits else None
            for key, _ in self.sel.select(timeout):
                if self.sel.get_map().get(key.fd) is not key:
                    continue  # unregistered (or its fd reused) by an earlier event of this batch
                kind, command = key.data
                if kind == "request":
                    if not self._request():
                        self._kill_all()
                        return
                elif kind == "report":
                    self._read_report(command)
                elif kind == "exit":
                    self._ended(command)
                else:
                    self._given_up(command)
            now = time.monotonic()
            for command in list(self.commands):
                if command.report is not None and now >= command.deadline:
                    # Held before its exec (stopped?), or just past it: either way it goes, and
                    # its end says so (as a command killed: never "not started" after the fork).
                    os.kill(command.pid, signal.SIGKILL)  # ours, not reaped yet: never another process
                    command.deadline = float("inf")
                elif command.reap_at is not None and now >= command.reap_at:
                    self._ended(command)
            for pid in list(self.orphans):
                with contextlib.suppress(ChildProcessError):
                    if not os.waitpid(pid, os.WNOHANG)[0]:
                        continue
                self.orphans.discard(pid)

    def _request(self) -> bool:
        msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, FDS)
        if not msg:
            return False  # the host closed its end
        for fd in fds:
            os.set_inheritable(fd, False)
        try:
            if len(fds) == FDS:
                self._start(msg, fds)
            elif fds:
                with socket.socket(fileno=os.dup(fds[0])) as channel:
                    _send(channel, b"error a request without its fds")
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _start(self, msg: bytes, fds: list[int]) -> None:
        channel = socket.socket(fileno=os.dup(fds[0]))
        if _closed(channel):  # the host gave up on it before we got to it: it never runs
            channel.close()
            return
        try:
            req = json.loads(msg)
            # The pid namespace of our children (not ours): the child is forked into the agent's.
            _check(self.libc.setns(fds[5], CLONE_NEWPID), self.libc, "setns pid")
            if self.direct and not req.get("nproc") and self._bound(req["caps"]):
                self._start_direct(req, fds, channel)
                return
            read_end, write_end = os.pipe()
        except Exception as exc:  # noqa: BLE001 - a bad request: said, nothing started
            _send(channel, _error(exc))
            channel.close()
            return
        try:
            channel.send(b"forking")  # from here on it may run: the host never runs it again
            pid = os.fork()
        except OSError:  # the host is gone, or no fork: nothing runs
            os.close(read_end)
            os.close(write_end)
            _send(channel, b"error the spawner could not fork")
            channel.close()
            return
        if pid == 0:
            try:
                _close_all_but([*fds[1:], write_end])  # nothing of ours lives on in it: not our socket
                _become(req, fds, self.libc, self.last_cap, write_end)
            except BaseException as exc:  # noqa: BLE001 - any failure goes to the host, which runs it another way
                try:
                    os.write(write_end, _error(exc))
                except OSError:
                    pass
            os._exit(0)
        os.close(write_end)
        with contextlib.suppress(OSError):  # its own group from now on (it makes it too): a kill reaches it
            os.setpgid(pid, pid)
        os.set_blocking(read_end, False)  # read as far as it goes, never waited on (_drain)
        self._follow(_Command(pid, -1, channel, read_end))

    def _follow(self, command: _Command) -> bool:
        """Follow ``command`` (its report pipe, if any, its pidfd, its channel) in the loop;
        False when it cannot be followed (out of fds): it is killed and reads as killed (it
        may have run already)."""
        pid = command.pid
        registered: list[int] = []
        try:
            command.pidfd = os.pidfd_open(pid)
            watched = ((command.report, "report"), (command.pidfd, "exit"), (command.channel.fileno(), "channel"))
            for fd, kind in watched:
                if fd is not None:
                    self.sel.register(fd, selectors.EVENT_READ, (kind, command))
                    registered.append(fd)
        except OSError:
            _kill_group(pid)
            os.kill(pid, signal.SIGKILL)  # ours, not reaped yet: never another process
            self.orphans.add(pid)
            for fd in registered:
                self.sel.unregister(fd)
            for fd in (command.report, command.pidfd):
                if fd is not None and fd >= 0:
                    os.close(fd)
            _send(command.channel, b"exit -9")
            command.channel.close()
            return False
        self.commands.add(command)
        return True

    def _bound(self, caps: "list[int]") -> bool:
        """Cut our own bounding set to ``caps`` (once: it cannot grow back), and set what an exec
        from us keeps: no ambient capabilities, no new privileges. Our own capabilities stay
        (we still enter namespaces); a command we start gets ``caps`` at its exec. False when
        the set was cut to more than ``caps`` before: then a child cuts it further (_become).

        Raises:
            OSError: ``caps`` holds one given up before (the request gets ``error``)."""
        keep = frozenset(caps)
        if self.bounded is None:
            for cap in range(self.last_cap + 1):
                if cap not in keep:
                    _check(self.libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), self.libc, "drop a capability")
            _check(self.libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), self.libc,
                   "clear ambient capabilities")
            _check(self.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), self.libc, "no new privileges")
            self.bounded = keep
        if keep - self.bounded:  # no child of ours can have them any more: said, the chain runs it
            raise OSError(f"capabilities {sorted(keep - self.bounded)} were given up for good")
        return self.bounded == keep

    def _enter(self, ipc: int, mnt: int, root: int) -> None:
        _check(self.libc.setns(ipc, CLONE_NEWIPC), self.libc, "setns ipc")
        _check(self.libc.setns(mnt, CLONE_NEWNS), self.libc, "setns mnt")
        os.fchdir(root)
        os.chroot(".")

    def _start_direct(self, req: "dict[str, Any]", fds: "list[int]", channel: socket.socket) -> None:
        """Start the command from here, without a copy of us: we enter the agent's namespaces
        and root for the moment of the start (subprocess's vfork: the child shares our memory
        until its exec, which is all it does but its process group, workdir and fds), then
        come back to ours. Our OOM score is the command's for that moment (a child inherits
        it), then ours again."""
        _, out, null, mnt, ipc, _, root = fds
        argv, cwd = req["argv"], req["cwd"]
        try:
            channel.send(b"forking")  # from here on it may run: the host never runs it again
        except OSError:  # the host gave up on it: it never runs
            channel.close()
            return
        popen, entered, failure = None, False, None
        try:
            self._enter(ipc, mnt, root)
            if req.get("oom") is not None:
                os.pwrite(self.oom_fd, str(int(req["oom"])).encode(), 0)
            entered = True
            popen = subprocess.Popen(argv, stdin=null, stdout=out, stderr=out, cwd=cwd, env=req["env"],
                                     close_fds=True, restore_signals=True, process_group=0)
        except OSError as exc:
            failure = exc
        finally:  # back, also from half way in
            self._leave(popen)
        if popen is None:
            assert failure is not None
            if not entered or failure.filename is None:  # we could not enter, or the fork failed: nothing ran
                _send(channel, _error(failure))
            elif failure.filename == cwd and failure.filename != argv[0]:  # as nsenter says it: it did not run
                os.write(out, f"nsenter: cannot open current working directory: {failure.strerror}\n".encode())
                _send(channel, b"done 1")
            else:  # it did not run: as setpriv, the chain's last step, says it
                os.write(out, f"setpriv: failed to execute {argv[0]}: {failure.strerror}\n".encode(errors="replace"))
                _send(channel, b"done %d" % (127 if isinstance(failure, FileNotFoundError) else 126))
            channel.close()
            return
        popen.returncode = 0  # followed here, by its pidfd: subprocess must never wait on its pid
        command = _Command(popen.pid, -1, channel, None)
        command.deadline, command.started = float("inf"), True
        if self._follow(command):
            _send(channel, b"started", (command.pidfd,))

    def _leave(self, started: "subprocess.Popen[bytes] | None") -> None:
        """Back to our own namespaces, root and OOM score. A spawner that cannot come back
        exits (it never serves from the agent's), killing ``started`` and what it runs first:
        nobody would follow them."""
        try:
            self._enter(*self.own)
            os.pwrite(self.oom_fd, self.own_oom, 0)
        except OSError:
            if started is not None:
                _kill_group(started.pid)
                os.kill(started.pid, signal.SIGKILL)
            self._kill_all()
            os._exit(1)

    def _read_report(self, command: _Command) -> None:
        if self._drain(command) == "eof":
            self._close_report(command)

    def _close_report(self, command: _Command) -> None:
        """The child exec'd the command (nothing said) or gave up: tell the host."""
        if command.report is None:
            return
        self.sel.unregister(command.report)
        os.close(command.report)
        command.report = None
        if command.said:
            _send(command.channel, command.said)  # the child ends by itself; reaped when it has
        else:
            command.started = True
            _send(command.channel, b"started", (command.pidfd,))

    def _ended(self, command: _Command) -> None:
        if command.report is not None:  # its end came first in this batch: what it said is all there
            self._drain(command)
            self._close_report(command)
        try:
            pid, status = os.waitpid(command.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = command.pid, 9  # as a kill would read
        if pid == 0:  # ended, but a tracer holds it until it reaps it: look again later
            if command.reap_at is None:
                self.sel.unregister(command.pidfd)
            command.reap_at = time.monotonic() + REAP_RETRY_S
            return
        self.commands.discard(command)
        if command.reap_at is None:
            self.sel.unregister(command.pidfd)
        os.close(command.pidfd)
        if command.channel.fileno() in self.sel.get_map():
            self.sel.unregister(command.channel)
        if command.started:
            _send(command.channel, b"exit %d" % os.waitstatus_to_exitcode(status))
        command.channel.close()

    @staticmethod
    def _drain(command: _Command) -> str:
        """Read what the child wrote so far without waiting: "eof" (it exec'd or ended), or
        "empty" (it is still on its way)."""
        assert command.report is not None
        while True:
            try:
                chunk = os.read(command.report, 4096)
            except BlockingIOError:
                return "empty"
            if not chunk:
                return "eof"
            command.said += chunk

    def _given_up(self, command: _Command) -> None:
        """The host closed the channel (it gave up): the command goes; its end is still said."""
        self.sel.unregister(command.channel)
        if command.started:
            _kill_group(command.pid)
        else:
            os.kill(command.pid, signal.SIGKILL)  # ours, not reaped yet: never another process
            _kill_group(command.pid)  # it may have exec'd already

    def _kill_all(self) -> None:
        for command in self.commands:
            _kill_group(command.pid)
            if command.report is not None:  # not exec'd yet, maybe not in its group yet: ours, unreaped
                os.kill(command.pid, signal.SIGKILL)


def _close_all_but(keep: list[int]) -> None:
    """Close every fd above 2 but ``keep`` (those open, as /proc lists them: a range up to the
    fd limit is a million ``close`` calls on Python 3.9)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own fd, closed already
                os.close(fd)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _serve(sock: socket.socket) -> None:
    os.set_inheritable(sock.fileno(), False)  # never in a command: it would reach us with it
    spawner = _Spawner(sock)
    os.close(os.pidfd_open(os.getpid()))  # pidfds (Linux 5.3+) or no spawner: the host then uses the chain
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # we wait on our children: never reaped for us
    # Not dumpable: a core-dumping signal the agent sends a command before its exec (a vfork
    # child shares our memory) dumps nothing, and before Linux 5.16 would have killed us too;
    # nor may the agent read our memory through that child. A command's exec makes it dumpable.
    _check(spawner.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), spawner.libc, "not dumpable")
    # Everything we use is imported: nothing may be imported later, from the agent's root,
    # which we are in while we start a command.
    sys.path[:] = []
    sys.path_importer_cache.clear()
    gc.disable()  # no collection in a child: it would touch (and copy) every page it forked with
    gc.freeze()
    sock.send(b"ready")
    spawner.serve()


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
