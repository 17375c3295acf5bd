"""Reset in place: kill the agent's pid namespace, put the writable dirs back as an episode
starts, and take the next episode's shell (started in the background)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import posixpath
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.local.box import (
    _DIR_MODES,
    _KILL_TIMEOUT_S,
    _SHELL_GRACE_S,
    _SKELETON,
    _START_TIMEOUT_S,
    _Box,
    _Boxes,
    _Shell,
)
from agentunit_gym.backends.sandbox.local.etc_template import (
    _CopyEntry,
    _etc_copy,
)
from agentunit_gym.backends.sandbox.local.hostfs import (
    _drop_xattrs,
    _read_small_file,
    _rmtree,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    WRITABLE_DIRS,
    restore_ptmx,
)
from agentunit_gym.backends.sandbox.local.oneoff import _OneOffs
from agentunit_gym.backends.sandbox.local.procfs import (
    _mount_points,
    _wait_readable,
)
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.backends.sandbox.local.shell import _AgentShell
from agentunit_gym.errors import BackendTimeoutError

logger = logging.getLogger("agentunit_gym")


class _InPlaceReset:
    """Reset in place: the writable dirs put back as they started, and the next episode's shell."""

    def __init__(self, setup: _Setup, boxes: _Boxes, shells: _AgentShell, one_offs: _OneOffs) -> None:
        self.setup, self.boxes, self.shells, self.one_offs = setup, boxes, shells, one_offs

    def launch_next_shell(self, box: _Box) -> None:
        """Start the next episode's shell in the background (with ``warm_spare``)."""
        setup = self.setup
        if setup.warm_spare and setup.mechanism != "none" and box.next_shell is None and not setup.closed:
            box.next_shell = self.setup.in_background(self.shells.shell_ready, box)

    def _take_next_shell(self, box: _Box) -> _Shell | None:
        """The shell :meth:`_launch_next_shell` started, if it came up and still lives."""
        future, box.next_shell = box.next_shell, None
        if future is None:
            return None
        try:
            shell = future.result(timeout=_START_TIMEOUT_S + _KILL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of it means: start one now
            logger.debug("local sandbox: the next shell is unusable (%s); starting one", exc)
            self.boxes.end_when_up(future)  # if it comes up after all
            return None
        if shell.proc.poll() is not None:
            self.boxes.end_shell(shell)
            return None
        return shell

    def _start_state(self) -> dict[str, _CopyEntry]:
        """What the writable dirs hold as an episode starts (the dirs themselves aside), by path
        under ``w/``, parents first: /etc's copy of the template (each of its read-only trees an
        empty dir, the mount point) and the /var, /run and /home skeleton."""
        if self.setup.start_state is None:
            entries: list[_CopyEntry] = []
            if self.setup.mechanism != "none":
                etc = self.setup.etc
                assert etc is not None
                entries += [(f"etc/{rel}", kind, mode, payload) for rel, kind, mode, payload in _etc_copy(etc)]
            for rel, what in _SKELETON:
                entries.append((rel, "link", 0o777, what) if isinstance(what, str) else (rel, "dir", what, b""))
            self.setup.start_state = {entry[0]: entry for entry in entries}
        return self.setup.start_state

    def fill(self, box: _Box, kept: frozenset[str] = frozenset()) -> None:
        """Make the writable dirs hold what an episode starts with: every entry of
        :meth:`_start_state` but those in ``kept`` (found as they should be)."""
        made: list[str] = []
        for rel, kind, mode, payload in self._start_state().values():
            if rel in kept:
                continue
            path = os.path.join(box.dir, "w", rel)
            if kind == "link":
                os.symlink(payload, path)
            elif kind == "dir":
                with contextlib.suppress(FileExistsError):  # a mount point of /etc kept by _clear
                    os.mkdir(path)
                os.chmod(path, mode)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    data = memoryview(payload if isinstance(payload, bytes) else payload.encode())
                    while data:
                        data = data[os.write(fd, data):]
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
            made.append(path)
        for d in WRITABLE_DIRS:
            os.chmod(box.writable(d), _DIR_MODES.get(d, 0o755))
        if self.setup.owner_uid is not None:
            for path in made:
                os.lchown(path, self.setup.owner_uid, self.setup.owner_uid)
        if self.setup.multi_user:  # /home/agent is agent's, as in the docker image
            usermap.give_homes(box.writable("/etc"), box.writable("/home"))

    def recycle(self, box: _Box) -> bool:
        """Reset ``box`` in place, as the docker supervisor resets its container: kill the
        agent's pid namespace (every process of the episode; its mount and IPC namespaces and
        its /dev/shm go with it), put the writable dirs back as they started (:meth:`_clear`,
        :meth:`fill`) and take the next episode's shell (started in the background, or now).
        The holder and the box's namespaces stay: that saves most of a reset's CPU (new
        namespaces, bubblewrap's mounts).

        The agent cannot have changed the box's own namespaces: it runs without the
        capabilities to mount, remount, or configure the network or hostname
        (:func:`agent_caps_argv`), in namespaces of its own. What it could still change is
        checked: the box's mount points (a directory renamed in /etc moves one), and whether
        anything ran in the box's namespaces instead of the agent's (``tainted``).

        Returns:
            False when the box cannot be reset in place (the caller replaces it); the agent's
            processes may be gone by then.

        Raises:
            BackendTimeoutError: the agent's processes did not die, or the new shell did not answer.
        """
        if self.setup.mechanism == "none" or box.tainted or not box.mounts or box.shell is None \
                or not self.boxes.box_alive(box):
            return False
        init = self.boxes.agent_init(box)
        if init is None:
            return False
        try:
            pidfd = os.pidfd_open(init)
        except OSError:
            return False
        try:
            # SIGKILL to the agent's PID 1: the kernel kills its whole pid namespace, and the
            # pidfd reads as exited only once every process of it is gone.
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            if not _wait_readable(pidfd, _KILL_TIMEOUT_S):
                raise BackendTimeoutError("the agent's processes in the local sandbox did not exit after SIGKILL.")
        finally:
            os.close(pidfd)
        # The processes above the agent's PID 1 (nsenter, unshare) now end by themselves, each
        # reaping the next; killing them instead would orphan unshare to the host's init.
        with contextlib.suppress(subprocess.TimeoutExpired):
            box.shell.proc.wait(timeout=_SHELL_GRACE_S)
        self.boxes.stop_shell(box)
        assert box.ns_pid is not None
        if _mount_points(box.ns_pid) != box.mounts or not self.boxes.box_alive(box):
            return False
        restore_ptmx(box.ns_pid, *self._root_ids())
        self.setup.fault("reset.dirs")
        self.fill(box, self._clear(box))
        self.setup.fault("reset.shell")
        box.shell = self._take_next_shell(box) or self.shells.shell_ready(box)
        self.launch_next_shell(box)
        if box.respawn and box.spawner is None:  # dropped when it stalled: the box gets one again
            box.respawn = False
            self.one_offs.start_spawner(box)
        return True

    def _root_ids(self) -> tuple[int, int]:
        """The host uid and gid behind root inside the sandbox."""
        if self.setup.owner_uid is not None:
            return self.setup.owner_uid, self.setup.owner_uid
        return os.getuid(), os.getgid()

    def _clear(self, box: _Box) -> frozenset[str]:
        """Move everything in the writable dirs that is not as an episode starts into a trash
        dir outside the sandbox's view, deleted in the background.

        An entry stays when it is one of :meth:`_start_state`'s and unchanged: same type,
        mode, owner and content (or link target), no extended attributes, one link. The mount
        points of /etc's read-only trees always stay, and so do the dirs on the way to them
        (put back to their mode). The top dirs' modes and extended attributes are reset here
        and by :meth:`_fill`.

        Returns:
            The paths (under ``w/``) that stay: :meth:`_fill` makes the rest.
        """
        state = self._start_state()
        mounts = {f"etc/{rel}" for rel, _ in self.boxes.etc_read_only()} if self.setup.mechanism != "none" else set()
        on_the_way: set[str] = set()
        for path in mounts:
            parent = posixpath.dirname(path)
            while parent != "etc" and parent not in on_the_way:
                on_the_way.add(parent)
                parent = posixpath.dirname(parent)
        uid, gid = self._root_ids()
        kept: set[str] = set(mounts)
        trash: Path | None = None
        moved = 0

        def unchanged(path: str, st: os.stat_result, kind: str, mode: int, payload: bytes | str) -> bool:
            if (st.st_uid, st.st_gid) != (uid, gid):
                return False
            if kind == "link":
                return stat.S_ISLNK(st.st_mode) and os.readlink(path) == payload
            if stat.S_IMODE(st.st_mode) != mode or os.listxattr(path, follow_symlinks=False):
                return False
            if kind == "dir":
                return stat.S_ISDIR(st.st_mode)
            data = payload if isinstance(payload, bytes) else payload.encode()
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != len(data):
                return False
            return _read_small_file(path, len(data) + 1) == data

        def clear(host: str, rel: str) -> None:
            nonlocal trash, moved
            for entry in os.scandir(host):
                path = f"{rel}/{entry.name}"
                if path in mounts:
                    continue
                st = entry.stat(follow_symlinks=False)
                spec = state.get(path)
                if spec is not None and unchanged(entry.path, st, *spec[1:]):
                    kept.add(path)
                    if spec[1] == "dir":
                        clear(entry.path, path)
                    continue
                if path in on_the_way and stat.S_ISDIR(st.st_mode):  # holds a mount point: put it right
                    os.lchown(entry.path, uid, gid)
                    os.chmod(entry.path, spec[2] if spec is not None else 0o755)
                    _drop_xattrs(Path(entry.path))
                    kept.add(path)
                    clear(entry.path, path)
                    continue
                if trash is None:
                    trash = Path(tempfile.mkdtemp(prefix="trash-", dir=box.dir))
                os.rename(entry.path, trash / str(moved))
                moved += 1

        for d in WRITABLE_DIRS:
            host = box.writable(d)
            os.lchown(host, uid, gid)  # the agent may have given it to another user (many users)
            os.chmod(host, 0o700)  # the agent may have made it unreadable (_fill sets the mode)
            _drop_xattrs(host)  # a default ACL would shape the next episode's files
            clear(str(host), d.lstrip("/"))
        if trash is not None:
            if self.setup.disk_bounded:  # the space is back when reset returns (one tmpfs per box)
                _rmtree(trash, mounts=False)
            else:
                self.setup.in_background(functools.partial(_rmtree, trash, mounts=False))
        return frozenset(kept)

