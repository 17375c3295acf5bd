"""The /etc template each box copies from, and where the box dirs live."""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentunit_gym.backends.sandbox.local.hostfs import (
    _chown_tree,
    _rmtree,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    _IMAGE_DIR,
)

logger = logging.getLogger("agentunit_gym")


HOST_ETC: tuple[str, ...] = (
    "adduser.conf", "alternatives", "bash.bashrc", "bindresvport.blacklist", "ca-certificates.conf",
    "debian_version", "default/locale", "default/useradd", "deluser.conf", "environment", "ethertypes",
    "gai.conf", "host.conf", "inputrc", "issue", "issue.net", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "libaudit.conf", "locale.alias", "locale.gen", "localtime", "login.defs", "magic", "magic.mime", "mime.types",
    "mke2fs.conf", "networks", "nsswitch.conf", "os-release", "pam.conf", "pam.d", "profile", "protocols",
    "python3", "python3.11", "python3.12", "rpc", "security", "services", "shells", "skel", "ssl/certs",
    "ssl/openssl.cnf", "terminfo", "timezone", "xattr.conf",
)
"""What the sandbox's fresh ``/etc`` copies from the host's: package-owned system
configuration (paths relative to ``/etc``; missing ones are skipped). No secrets (shadow,
keys), no users, no site data: passwd, group, shadow, hosts and hostname are our own
(``images/local/etc``)."""

ETC_READ_ONLY: tuple[str, ...] = ("alternatives", "ssl/certs", "pam.d", "security", "ld.so.conf.d", "skel",
                                  "terminfo", "python3", "python3.11", "python3.12")
"""Trees of the ``/etc`` template that each box binds read-only instead of copying: they
hold most of its files, and creating files is what makes a box slow to build (copying
all of them took a box from ~45 ms to ~150 ms here)."""

ETC_READ_ONLY_FILES: tuple[str, ...] = ("ld.so.cache", "ld.so.preload")
"""Files of each box's ``/etc`` bound read-only from the template (``ld.so.preload`` empty):
the dynamic loader reads them in every program, including the few that run in the box with
all of root's capabilities there (``setpriv`` on the way into ``run()``, the ``bwrap`` or
``unshare`` that starts the agent's shell). Writable, they would let the agent's library
run in those with every capability."""


def build_etc(dest: Path) -> None:
    """Make a fresh ``/etc`` in ``dest`` (which must not exist): :data:`HOST_ETC` copied from
    the host's, then our own files from ``images/local/etc`` on top."""
    dest.mkdir(mode=0o755)
    for rel in HOST_ETC:
        src = Path("/etc") / rel
        target = dest / rel
        if not (src.exists() or src.is_symlink()):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, target, symlinks=True, ignore_dangling_symlinks=True)
            else:
                shutil.copy2(src, target, follow_symlinks=False)
        except (OSError, shutil.Error) as exc:  # an unreadable file is left out, not fatal
            logger.debug("local sandbox: /etc/%s not copied: %s", rel, exc)
    shutil.copytree(_IMAGE_DIR / "etc", dest, dirs_exist_ok=True)
    for name in ("shadow", "gshadow"):
        os.chmod(dest / name, 0o640)
    for name in ETC_READ_ONLY_FILES:  # each must exist: it is a bind's mount point in every box
        (dest / name).touch(mode=0o644, exist_ok=True)
    os.symlink("../proc/self/mounts", dest / "mtab")


SHM_MIN_FREE = 1 << 30
"""``/dev/shm`` is used only with at least this much free: inside a Docker container it is
64 MiB by default, which a few sandboxes' files would fill."""


def default_temp_parent() -> Path:
    """Where a sandbox keeps its dirs unless given ``temp_dir``: ``/dev/shm`` when it is a
    tmpfs that every user may write, with :data:`SHM_MIN_FREE` free, and ``TMPDIR`` is not
    set; else the system temp dir.

    Why: a box is ~80 fresh files and dirs, made at each reset and deleted after. On a tmpfs
    that took ~1.5 ms of CPU here; on this machine's ext4 ``/tmp`` ~50 ms, most of a reset's
    cost (docs/sandbox-local.md, "Where the box dirs live"). The price: what the agent writes
    is held in memory, as it is in the docker sandbox's tmpfs layer.
    """
    shm = Path("/dev/shm")
    if "TMPDIR" not in os.environ and _is_tmpfs(shm):
        with contextlib.suppress(OSError):
            free = os.statvfs(shm)
            if (stat.S_IMODE(shm.stat().st_mode) & 0o1777 == 0o1777 and os.access(shm, os.W_OK | os.X_OK)
                    and free.f_bavail * free.f_frsize >= SHM_MIN_FREE):
                return shm
    return Path(tempfile.gettempdir())


@functools.lru_cache(maxsize=8)
def _is_tmpfs(path: Path) -> bool:
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            return any(f.split()[1:3] == [str(path), "tmpfs"] for f in mounts if len(f.split()) > 2)
    except OSError:
        return False


_CopyEntry = tuple[str, Literal["dir", "link", "file"], int, bytes | str]


@dataclass
class _EtcTemplate:
    """A shared ``/etc`` template: whose it is, what each box copies from it, how many use it."""

    key: tuple[int, str, int | None, bool]
    """(pid, temp dir, owner uid, network)."""
    entries: tuple[_CopyEntry, ...]
    users: int = 1


_ETC_TEMPLATES: dict[Path, _EtcTemplate] = {}
_ETC_LOCK = threading.Lock()


def shared_etc_template(parent: Path, owner_uid: int | None, network: bool) -> Path:
    """The ``/etc`` template the boxes copy from and bind parts of read-only: built once per
    process for each temp dir, owner and network setting, and removed when the last sandbox
    using it lets it go (:func:`release_etc_template`) or the process exits.
    Building one copies ~800 files from the host's ``/etc`` (0.2-0.3 s of CPU), which every
    sandbox paid at its start, all at once when an evaluation starts 64 of them.

    Safe to share: a box binds the template's big trees read-only and copies the rest, so no
    agent can write to it; sandboxes of one process run as the same host uid.
    """
    key = (os.getpid(), str(parent), owner_uid, network)
    with _ETC_LOCK:
        for path, template in list(_ETC_TEMPLATES.items()):
            if template.key == key:
                if path.is_dir():
                    template.users += 1
                    return path
                del _ETC_TEMPLATES[path]  # removed under us: build a new one
        holder = Path(tempfile.mkdtemp(prefix="agentunit-gym-etc-", dir=parent))
        try:
            build_etc(holder / "etc")
            if network:  # the host's resolver settings, for names to resolve
                with contextlib.suppress(OSError):
                    shutil.copyfile("/etc/resolv.conf", holder / "etc" / "resolv.conf")
            if owner_uid is not None:
                _chown_tree(holder, owner_uid)
            entries = _read_copy(holder / "etc")
        except BaseException:
            _rmtree(holder)
            raise
        if not _ETC_TEMPLATES:
            atexit.register(_remove_etc_templates, os.getpid())
        _ETC_TEMPLATES[holder / "etc"] = _EtcTemplate(key, entries)
        return holder / "etc"


def release_etc_template(path: Path) -> None:
    """One sandbox no longer uses the template at ``path``; the last one out removes it."""
    with _ETC_LOCK:
        template = _ETC_TEMPLATES.get(path)
        if template is not None and template.users > 1:
            template.users -= 1
            return
        _ETC_TEMPLATES.pop(path, None)
    _rmtree(path.parent)


def _etc_copy(path: Path) -> tuple[_CopyEntry, ...]:
    """What each box copies from the template at ``path`` (read when it was built)."""
    with _ETC_LOCK:
        template = _ETC_TEMPLATES.get(path)
    return template.entries if template is not None else _read_copy(path)


def _read_copy(template: Path) -> tuple[_CopyEntry, ...]:
    """What each box copies from ``template``: (relative path, kind, mode, content or link
    target), parents before children; each of :data:`ETC_READ_ONLY` is an empty dir and each
    of :data:`ETC_READ_ONLY_FILES` an empty file, the mount point of its read-only bind.
    Writing ~50 small files from memory takes a box ~1 ms, where ``shutil.copytree`` took
    ~10 ms of CPU (stat, copy and copystat per file)."""
    bound = {os.path.join(template, rel) for rel in ETC_READ_ONLY if (template / rel).is_dir()}
    bound_files = {os.path.join(template, rel) for rel in ETC_READ_ONLY_FILES}
    entries: list[_CopyEntry] = []
    for parent, dirs, files in os.walk(template):
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(parent, name)
            rel = os.path.relpath(path, template)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                entries.append((rel, "link", 0, os.readlink(path)))
            elif stat.S_ISDIR(st.st_mode):
                entries.append((rel, "dir", stat.S_IMODE(st.st_mode), b""))
            elif stat.S_ISREG(st.st_mode) and path in bound_files:
                entries.append((rel, "file", stat.S_IMODE(st.st_mode), b""))
            elif stat.S_ISREG(st.st_mode):
                with contextlib.suppress(OSError):  # an unreadable file is left out, as build_etc does
                    entries.append((rel, "file", stat.S_IMODE(st.st_mode), Path(path).read_bytes()))
        dirs[:] = [d for d in dirs if os.path.join(parent, d) not in bound
                   and not os.path.islink(os.path.join(parent, d))]
    return tuple(entries)


def _remove_etc_templates(pid: int) -> None:
    if os.getpid() != pid:  # a forked child exiting: the templates are its parent's
        return
    with _ETC_LOCK:
        for path, template in list(_ETC_TEMPLATES.items()):
            if template.key[0] == pid:
                _rmtree(path.parent)
                del _ETC_TEMPLATES[path]
