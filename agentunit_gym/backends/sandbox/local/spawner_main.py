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
- a child of the spawner enters the namespaces, sets itself up as the command must run
  (root directory, workdir, OOM score, no capabilities but ``caps``, no new privileges,
  the process limit) and starts the command (``subprocess``: a vfork, no copy of itself)
  in a process group of its own, signals as an exec leaves them;
  on the channel it says ``started`` with the command's pidfd, then ``exit <code>`` when it
  ended (negative: killed by that signal); ``done <code>`` when the command could not run
  (its workdir is gone, or it cannot be executed: what it printed is in the output); or ``error <text>`` when nothing
  was started (the host may then run it another way);
- when the host closes the channel before the command ended (it gave up on it), the
  command's process group is killed: nothing the host does not follow keeps running.
"""

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
from typing import Any

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
FDS = 7
_OWN_GROUP: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
"""The command leads a process group of its own (a ``preexec_fn`` before 3.11: no vfork then)."""
"""The fds of a request: channel, output, /dev/null, mount ns, IPC ns, pid ns, root."""


def _check(ret: int, libc: ctypes.CDLL, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _start(req: dict[str, Any], fds: list[int], libc: ctypes.CDLL, last_cap: int, channel: socket.socket) -> None:
    """In the child: enter, set up, start the command, report on ``channel``."""
    _, out, null, mnt, ipc, pidns, root = fds
    if req.get("oom") is not None:  # the box's /proc: ours is not in the agent's
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(int(req["oom"])))
    _check(libc.setns(ipc, CLONE_NEWIPC), libc, "setns ipc")
    _check(libc.setns(mnt, CLONE_NEWNS), libc, "setns mnt")
    _check(libc.setns(pidns, CLONE_NEWPID), libc, "setns pid")  # for the command, not us
    os.fchdir(root)
    os.chroot(".")
    try:
        os.chdir(req["cwd"])
    except OSError as exc:  # as nsenter says it, and exits 1: the command did not run
        os.write(out, f"nsenter: cannot open current working directory: {exc.strerror}\n".encode())
        channel.send(b"done 1")
        return
    if req.get("nproc"):
        resource.setrlimit(resource.RLIMIT_NPROC, (int(req["nproc"]), int(req["nproc"])))
    keep = set(req["caps"])
    for cap in range(last_cap + 1):
        if cap not in keep:
            _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), libc, "drop a capability")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), libc, "clear ambient capabilities")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), libc, "no new privileges")
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    argv = req["argv"]
    # subprocess's vfork: no copy of this process (a fork's copy on write and teardown were
    # most of a one-off's cost); signals as an exec leaves them (not posix_spawn: glibc's
    # leaves its two internal signals ignored in the command); a process group of its own,
    # in the spawner's session (outside the agent's namespace, as nsenter's).
    try:
        proc = subprocess.Popen(argv, stdin=null, stdout=out, stderr=out, env=req["env"], close_fds=True,
                                **_OWN_GROUP)
    except BaseException as exc:  # noqa: BLE001 - it did not run: as setpriv, the chain's last step, says it
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        reason = exc.strerror if isinstance(exc, OSError) else repr(exc)
        os.write(out, f"setpriv: failed to execute {argv[0]}: {reason}\n".encode(errors="replace"))
        channel.send(b"done %d" % code)
        return
    pid = proc.pid
    # From here on the command exists: we only ever report how it ended, never "not started".
    os.close(out)
    try:
        pidfd = os.pidfd_open(pid)
        socket.send_fds(channel, [b"started"], [pidfd])
        # Until it ends: if the host closes the channel first (it gave up), the command goes.
        with selectors.DefaultSelector() as sel:
            sel.register(channel, selectors.EVENT_READ)
            sel.register(pidfd, selectors.EVENT_READ)
            if not any(key.fileobj == pidfd for key, _ in sel.select()):
                _kill_group(pid)
    except BaseException:  # noqa: BLE001 - the host may be gone, or our pidfd failed: kill it
        _kill_group(pid)
    try:
        code = proc.wait()
    except BaseException:  # noqa: BLE001 - interrupted: as a kill would read
        code = -9
    try:
        channel.send(b"exit %d" % code)
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _serve(sock: socket.socket) -> None:
    os.set_inheritable(sock.fileno(), False)  # never in a command: it would reach us with it
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    os.close(os.pidfd_open(os.getpid()))  # pidfds (Linux 5.3+) or no spawner: the host then uses the chain
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children reap themselves
    gc.disable()  # no collection in a child: it would touch (and copy) every page it forked with
    gc.freeze()
    sock.send(b"ready")
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, FDS)
        if not msg:
            return  # the host closed its end
        for fd in fds:
            os.set_inheritable(fd, False)
        try:
            pid = os.fork() if len(fds) == FDS else -1
        except OSError:
            pid = -1
        if pid == 0:
            sock.close()  # ours only: a child holding it would hide the spawner's death from the host
            channel = socket.socket(fileno=fds[0])
            try:
                _start(json.loads(msg), fds, libc, last_cap, channel)
            except BaseException as exc:  # noqa: BLE001 - any failure goes to the host, which runs it another way
                try:
                    channel.send(b"error " + repr(exc).encode(errors="replace")[:4000])
                except OSError:
                    pass
            os._exit(0)
        if pid < 0 and fds:
            try:
                os.write(fds[0], b"error the spawner could not fork")
            except OSError:
                pass
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
