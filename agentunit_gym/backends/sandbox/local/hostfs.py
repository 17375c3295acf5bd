"""Host-side file helpers for the box dirs: never through a symlink the agent planted."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from agentunit_gym.backends.sandbox.local import box_tmpfs
from agentunit_gym.errors import ConfigError


def _rmtree(path: Path, *, mounts: bool = True) -> None:
    """Remove a tree the sandbox may have made unreadable (chmod 000 dirs). ``mounts=False``:
    the tree cannot hold a mount point of ours (a reset's trash, moved out of a box's writable
    dirs, where only the agent wrote), so the mount table is not read."""
    if mounts:
        box_tmpfs.unmount_under(path)  # a box's bounded tmpfs goes first (its files with it)
    def fix(func: object, p: str, exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(p, 0o700)
            parent = os.path.dirname(p)
            os.chmod(parent, 0o700)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=fix)


def _check_traversable(path: Path, uid: int) -> None:
    """Raise ConfigError unless ``uid`` may pass through every dir from / down to ``path``: the
    namespace tools run as that uid and must reach the sandbox's dirs."""
    for d in [path.resolve(), *path.resolve().parents]:
        st = d.stat()
        if not (st.st_mode & 0o001 or st.st_uid == uid):
            raise ConfigError(
                f"the local sandbox's temp dir {path} is below {d} (mode {stat.S_IMODE(st.st_mode):o}), which uid "
                f"{uid} cannot enter: as root, the sandbox runs as that unprivileged uid. Pass temp_dir= a dir "
                "every user may traverse (like /tmp).")


def _chown_tree(path: Path, uid: int) -> None:
    """Give a tree to ``uid`` (symlinks themselves, not their targets)."""
    os.lchown(path, uid, uid)
    for parent, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(parent, name), uid, uid)



def _read_small_file(path: str | os.PathLike[str], limit: int = 1 << 16) -> bytes:
    """At most ``limit`` bytes of a regular file the sandbox can write, read on the host: never
    through a symlink the agent planted (to a host file, ``/dev/zero``, a FIFO that would block).

    Raises:
        OSError: it is missing, a symlink or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _drop_xattrs(path: Path) -> None:
    """Remove the extended attributes (ACLs included) the agent may have set on ``path``."""
    with contextlib.suppress(OSError):
        for name in os.listxattr(path, follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.removexattr(path, name, follow_symlinks=False)

