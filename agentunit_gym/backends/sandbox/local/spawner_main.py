"""The one-off spawner's own program: it runs inside a local sandbox's box, as the box's root.

Started once per box (:mod:`.spawner` starts it, with ``python3 -I -S``), it starts each
one-off command (``run()``, the file helpers) into the agent's namespaces, so a one-off
costs one ``exec`` of the command itself instead of the five of the exec chain (the cgroup
join, ``setpriv``, ``nsenter``, ``setpriv`` again, the command). It lives in the box's own
pid and mount namespaces, which the agent's are children of: the agent cannot see it,
signal it or reach its socket (an unnamed socket pair with the host).

Standard library only, and for any Python 3.9+: the box's ``python3`` is the host's system
one, not ours.

The protocol, on a ``SOCK_SEQPACKET`` socket whose fd is ``argv[1]``:

- the spawner says ``ready`` once it runs;
- a request is one JSON message (``argv``, ``cwd``, ``env``, ``oom``, ``caps``, ``nproc``)
  with seven fds: a channel socket for this command alone, the output pipe, ``/dev/null``,
  and the agent's mount, IPC and pid namespaces and root directory;
- a child of the spawner, forked into the agent's pid namespace (the spawner's own stays
  the box's), enters the other namespaces, sets itself up as the command must run
  (root directory, workdir, OOM score, no capabilities but ``caps``, no new privileges,
  the process limit, a process group of its own, signals as an exec from a shell leaves
  them) and execs the command: the child becomes it, so the copy of the spawner a fork
  makes lives only until that exec (a child that ran the command and waited for it kept
  the copy alive, and both it and the spawner copied every page they wrote meanwhile);
- on the channel the spawner says ``started`` with the command's pidfd, then ``exit
  <code>`` when it ended (negative: killed by that signal); ``done <code>`` when the command
  could not run (its workdir is gone, or it cannot be executed: what it printed is in the
  output); or ``error <text>`` when nothing was started (the host may then run it another
  way); the child tells the spawner how it went on a pipe that its exec closes;
- when the host closes the channel before the command ended (it gave up on it), the
  command's process group is killed: nothing the host does not follow keeps running; when
  the host closes the spawner's socket, every command still running is killed and the
  spawner exits. A spawner that dies (killed) closes the channels of what it started: the
  host then kills those commands itself.
"""

import ctypes
import gc
import json
import os
import resource
import selectors
import signal
import socket
import sys
from typing import Any

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
FDS = 7
"""The fds of a request: channel, output, /dev/null, mount ns, IPC ns, pid ns, root."""
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)
REPORT_TIMEOUT_S = 10.0
"""How long a child may take to exec the command (it enters, sets up, execs: a few ms)."""


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


def _report(read_end: int) -> bytes:
    """What the child wrote before it exec'd the command or gave up (nothing: it runs)."""
    got = b""
    with selectors.DefaultSelector() as sel:
        sel.register(read_end, selectors.EVENT_READ)
        while sel.select(REPORT_TIMEOUT_S):
            chunk = os.read(read_end, 4096)
            if not chunk:
                return got
            got += chunk
    return b"error the command did not start in time"


def _send(channel: socket.socket, message: bytes, fds: tuple[int, ...] = ()) -> None:
    try:
        socket.send_fds(channel, [message], list(fds)) if fds else channel.send(message)
    except OSError:
        pass  # the host gave up on it


class _Spawner:
    """The spawner's loop: requests on ``sock``, and the commands it started, each followed
    through its pidfd (its end reported on its channel) and its channel (closed by the host
    before the end: the command's group is killed)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/sys/kernel/cap_last_cap") as f:
            self.last_cap = int(f.read())
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, "request")
        self.running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, channel)

    def serve(self) -> None:
        while True:
            for key, _ in self.sel.select():
                if key.data == "request":
                    if not self._request():
                        self._kill_all()
                        return
                elif key.data == "exit":
                    self._ended(key.fd)
                else:  # the host closed the channel (gave up on it): the command goes, its end is still said
                    self.sel.unregister(key.fileobj)
                    _kill_group(key.data)

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
        try:
            req = json.loads(msg)
            # The pid namespace of our children (not ours): the child is forked into the agent's.
            _check(self.libc.setns(fds[5], CLONE_NEWPID), self.libc, "setns pid")
            read_end, write_end = os.pipe()
        except (ValueError, OSError) as exc:
            _send(channel, b"error " + repr(exc).encode(errors="replace")[:4000])
            channel.close()
            return
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            try:
                os.close(read_end)
                _become(req, fds, self.libc, self.last_cap, write_end)
            except BaseException as exc:  # noqa: BLE001 - any failure goes to the host, which runs it another way
                try:
                    os.write(write_end, b"error " + repr(exc).encode(errors="replace")[:4000])
                except OSError:
                    pass
            os._exit(0)
        os.close(write_end)
        try:
            if pid < 0:
                _send(channel, b"error the spawner could not fork")
                channel.close()
                return
            report = _report(read_end)
        finally:
            os.close(read_end)
        if report:  # it did not run (the child gave up, or hangs before its exec): it goes
            os.kill(pid, signal.SIGKILL)  # ours and not reaped yet: never another process
            os.waitpid(pid, 0)
            _send(channel, report)
            channel.close()
            return
        # From here on the command exists: we only ever report how it ended, never "not started".
        pidfd = os.pidfd_open(pid)
        self.running[pidfd] = (pid, channel)
        self.sel.register(pidfd, selectors.EVENT_READ, "exit")
        self.sel.register(channel, selectors.EVENT_READ, pid)
        _send(channel, b"started", (pidfd,))

    def _ended(self, pidfd: int) -> None:
        pid, channel = self.running.pop(pidfd)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        try:
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except ChildProcessError:
            code = -9
        if channel.fileno() in self.sel.get_map():
            self.sel.unregister(channel)
        _send(channel, b"exit %d" % code)
        channel.close()

    def _kill_all(self) -> None:
        for pid, _ in self.running.values():
            _kill_group(pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _serve(sock: socket.socket) -> None:
    os.set_inheritable(sock.fileno(), False)  # never in a command: it would reach us with it
    spawner = _Spawner(sock)
    os.close(os.pidfd_open(os.getpid()))  # pidfds (Linux 5.3+) or no spawner: the host then uses the chain
    gc.disable()  # no collection in a child: it would touch (and copy) every page it forked with
    gc.freeze()
    sock.send(b"ready")
    spawner.serve()


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
