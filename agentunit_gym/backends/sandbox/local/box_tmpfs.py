"""A size-bounded tmpfs under each local box, so that a full disk is ENOSPC in the agent's shell.

The box's writable dirs (``/etc``, ``/tmp``, ``/root``, ...) are dirs of the box's host
dir, bound into the sandbox. Mounted on that host dir, a tmpfs with ``size=`` (the
sandbox's ``disk``) bounds all of them together: ``dd`` past it gets "No space left on
device", and what the agent wrote stays within the box's memory cgroup (``memory +
disk``), so it is never an out-of-memory kill. Reset in place clears the dirs, which
frees the space (the trash dir is on the same tmpfs, and is deleted right after).

Mounting in the host's mount namespace needs CAP_SYS_ADMIN there (root). Without it the
local sandbox's files are bounded only by its memory cgroup, if it has one, and the
sandbox warns at start (docs/sandbox-local.md, "Limits").
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import re
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger("agentunit_gym")

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_mounted: set[str] = set()
"""Mount points this process made (only those are unmounted by :func:`unmount_under`)."""
_ever_mounted = False
_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def mount(path: Path, size: int, *, uid: int | None = None) -> None:
    """Mount a tmpfs of ``size`` bytes on the empty dir ``path`` (mode 700, owned by ``uid``).

    Raises:
        OSError: the mount failed (EPERM: not root).
    """
    data = f"size={size},mode=700" + (f",uid={uid},gid={uid}" if uid is not None else "")
    if _libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")
    global _ever_mounted
    with _LOCK:
        _mounted.add(os.fsdecode(path))
        _ever_mounted = True


@functools.lru_cache(maxsize=1)
def can_mount() -> bool:
    """Whether :func:`mount` works here (root with CAP_SYS_ADMIN in our mount namespace): tried
    once on a scratch dir."""
    if os.geteuid() != 0:
        return False
    scratch = Path(tempfile.mkdtemp(prefix="agentunit-gym-probe-"))
    try:
        mount(scratch, 1 << 16)
        unmount_under(scratch)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            scratch.rmdir()


def unmount_under(path: Path) -> None:
    """Detach every tmpfs at or below ``path`` that this process mounted, or that the mount
    table shows there (a box whose removal was cut short), before the tree is removed.

    What the tmpfs held goes when its last user does (the box's processes are dead by then).
    A failure is logged, not raised: this runs on the way out (close, reset, background).
    """
    prefix = os.fsdecode(path).rstrip("/")
    with _LOCK:
        ours = {p for p in _mounted if p == prefix or p.startswith(prefix + "/")}
        _mounted.difference_update(ours)
        if not ours and not _ever_mounted:
            return  # this process never mounted one: nothing of ours can be there
    points = ours | {p for p in _tmpfs_mount_points() if p == prefix or p.startswith(prefix + "/")}
    for point in sorted(points, reverse=True):  # the deepest first
        if _libc().umount2(point.encode(), _MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL,
                                                                                           errno.ENOENT):
            # The removal then fails on the mount point, and the tmpfs stays until reboot.
            logger.warning("local sandbox: could not unmount %s: %s", point, os.strerror(ctypes.get_errno()))


def _tmpfs_mount_points() -> list[str]:
    """Mount points of the tmpfs mounts in our mount namespace (octal escapes decoded)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
            lines = table.read().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if " - tmpfs " in line and len(fields) > 4:
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


@atexit.register
def _unmount_all() -> None:
    """At exit, what a sandbox that was never closed left mounted (its files are gone with it)."""
    with _LOCK:
        points = sorted(_mounted, reverse=True)
        _mounted.clear()
    for point in points:
        _libc().umount2(point.encode(), _MNT_DETACH)
