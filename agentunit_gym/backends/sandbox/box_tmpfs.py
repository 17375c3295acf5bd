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

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger("agentunit_gym")

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_mounted: set[str] = set()
"""Mount points this process made (only those are unmounted by :func:`unmount_under`)."""
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
    with _LOCK:
        _mounted.add(os.fsdecode(path))


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
    """Detach every tmpfs :func:`mount` made at or below ``path`` (before the tree is removed).

    What the tmpfs held goes when its last user does (the box's processes are dead by then).
    A failure is logged, not raised: this runs on the way out (close, reset, background).
    """
    prefix = os.fsdecode(path).rstrip("/")
    with _LOCK:
        points = sorted((p for p in _mounted if p == prefix or p.startswith(prefix + "/")), reverse=True)
        for point in points:
            _mounted.discard(point)
    for point in points:
        if _libc().umount2(point.encode(), _MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL,
                                                                                           errno.ENOENT):
            # Called on the way to removing the tree (close, reset, in the background): the
            # removal then fails on the mount point, and the tmpfs stays until reboot.
            logger.warning("local sandbox: could not unmount %s: %s", point, os.strerror(ctypes.get_errno()))
