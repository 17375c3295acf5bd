"""The ``local`` sandbox: Linux namespaces on this machine, no daemon.

Layout of one sandbox:

* a **holder** process starts the namespaces (user, pid, net, mount, ipc, uts) with
  bubblewrap when it is installed, else with ``unshare`` and ``images/local/setup.sh``.
  The sandbox's root is its own: a read-only tmpfs holding read-only binds of the host's
  system dirs (``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` links or dirs) and fresh
  writable dirs (``/etc``, ``/tmp``, ``/root``, ``/home``, ``/var``, ``/run``) made for
  each box: ``/etc`` from our own passwd/group/shadow plus an allowlist of the host's
  system configuration (:data:`HOST_ETC`), the rest empty. Nothing else of the host (its
  ``/etc``, ``/root``, ``/home``, ``/var``, ``/srv``, ``/opt``, ``/mnt``, ``/media``, this
  checkout) is mounted. ``/proc`` and ``/dev`` are private and minimal; there is no
  network. Root inside maps to one unprivileged host uid: the caller's own, or, when the
  caller is root, :data:`ROOT_CALLER_UID` (the holder and every process entering the
  sandbox drop to it with ``setpriv`` first), followed then by uids 1-65535 inside
  (:mod:`~agentunit_gym.backends.sandbox.usermap`: :attr:`LocalSandbox.multi_user`). The
  holder waits on a pipe from us, so when our process goes away the whole pid namespace
  goes with it.
* the agent's **persistent shell** and every one-off ``run()`` enter the holder's
  namespaces with ``nsenter``, so init scripts and checks see exactly what the agent sees
  (files and processes) without going through the agent's shell.
* shells nest as in a terminal: a command that starts another interactive shell (``bash``,
  ``sh``) hands it the terminal, and the next commands are written there as lines until it
  exits (the supervisor's shell detection is shared; see docs/sandbox-docker.md); ``su -
  jack`` too where many users are mapped. With one uid, ``su`` fails at once, with a note.
* the agent's processes hold the docker sandbox's capabilities only
  (:data:`AGENT_CAPABILITIES`, dropped with ``setpriv`` inside the box), and its shell gets
  pid, mount and IPC namespaces and a ``/dev/shm`` of its own; the box's ``/dev`` is
  read-only. So the agent cannot change the box's own namespaces.
* all of that (dirs, holder, shell) is one **box**. ``reset()`` resets it in place: it
  kills the agent's pid namespace (every process of the episode), puts the writable dirs
  back as they started (what is unchanged stays) and takes the next episode's shell,
  started in the background. When that cannot be proven safe (the box's mount points
  moved, or something ran in the box's own namespaces), it kills the box's holder and
  continues in a new box (the **warm spare**, built in the background after such a reset).

Limits (:mod:`~agentunit_gym.backends.sandbox.limits`): a cgroup per sandbox
(:mod:`~agentunit_gym.backends.sandbox.cgroup`: memory without swap, CPU, pids) where the
host gives one (root on cgroup v1/v2 hosts, or a delegated cgroup), and a size-bounded
tmpfs under each box's writable dirs (:mod:`~agentunit_gym.backends.sandbox.box_tmpfs`,
root only). Without a pids cgroup, ``RLIMIT_NPROC`` on the processes that enter the sandbox,
counted inside the sandbox's own user namespace (root callers' sandboxes run as an
unprivileged uid, so it binds them too). After each command, what it left forking past
``runaway_budget`` is killed so the next command can run.
See docs/sandbox-local.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import os
import posixpath
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox import box_tmpfs, cgroup, usermap
from agentunit_gym.backends.sandbox.base import AGENT_CAPABILITIES, ExecResult, Language, Sandbox
from agentunit_gym.backends.sandbox.limits import SHM_SIZE, Limits, add_memory_note, resolve_limits
from agentunit_gym.errors import AgentUnitError, BackendError, BackendTimeoutError, ConfigError, IsolationError
from agentunit_gym.images.os.supervisor import (
    AGENT_OOM_SCORE_ADJ,
    EXITED_NOTE,
    NESTED_KILLED_NOTE,
    SHELL_SETUP,
    flush_terminal_input,
    interactive_shell,
    quote,
)

logger = logging.getLogger("agentunit_gym")

Isolation = Literal["auto", "bwrap", "unshare", "none"]

WRITABLE_DIRS: tuple[str, ...] = ("/etc", "/tmp", "/root", "/home", "/var", "/run")
"""Sandbox paths backed by private host dirs made fresh for each box: the only writable
places, discarded on reset."""

SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The host's dirs the sandbox sees, read-only (those that exist; symlinks stay symlinks)."""

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

ROOT_CALLER_UID = usermap.BASE
"""The host uid that root inside the sandbox maps to when the caller is root (an unused,
unprivileged uid; the other users of the sandbox, when it maps many, follow it: see
:mod:`~agentunit_gym.backends.sandbox.usermap`). A non-root caller's sandbox maps root to the
caller's own uid."""

_IMAGE_DIR = Path(__file__).resolve().parent.parent.parent / "images" / "local"
_DIR_MODES = {"/tmp": 0o1777, "/root": 0o700}
# Inside the fresh /var and /run (mode, or a symlink target).
_SKELETON: tuple[tuple[str, int | str], ...] = (
    ("var/tmp", 0o1777), ("var/log", 0o755), ("var/lib", 0o755), ("var/cache", 0o755), ("var/spool", 0o755),
    ("var/mail", 0o2775), ("var/backups", 0o755), ("var/local", 0o2775), ("var/opt", 0o755),
    ("var/run", "/run"), ("var/lock", "/run/lock"), ("run/lock", 0o1777), ("home/agent", 0o755),
)


_DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
}

USER_SWITCH_NOTE = ("\n[the local sandbox maps one user only (root): su, runuser and setpriv cannot switch to "
                    "another user here (only a sandbox started by root maps many); switching users needs the docker "
                    "sandbox]\n")
"""Added to the output of a command that failed to switch users (``su - jack``)."""
_USER_SWITCH_FAILURES = ("cannot set groups: Operation not permitted", "setresuid failed: Invalid argument",
                         "setgid: Invalid argument", "setuid: Invalid argument")

# Run as root of the box with all its capabilities, in the agent's new pid, mount and IPC
# namespaces, before the agent's shell: hide /proc/tty/driver (root-only on the host, so
# unreadable here: `find /` would exit 1) under an empty read-only tmpfs, give the agent a
# /dev/shm of its own (the box's /dev is read-only; this one goes with the namespace, so a
# reset in place leaves nothing there), then drop to the agent's capabilities (``$@``
# starts with :func:`agent_caps_argv`) and `exec` the shell, which stays PID 1.
# (`mount -n`: libmount would otherwise leave /run/mount behind in the sandbox's /run.)
_AGENT_INIT = ('mount -n -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=555 none /proc/tty/driver 2>/dev/null; '
               f'mount -n -t tmpfs -o nosuid,nodev,mode=1777,size={SHM_SIZE} shm /dev/shm || exit 97; exec "$@"')

_START_TIMEOUT_S = 10.0
_RUNAWAY_WATCH_S = 0.5  # how long what a command left behind is watched while it keeps growing
_KILL_TIMEOUT_S = 5.0
# After a timeout: how long we keep killing the command's process groups (a fork bomb keeps
# making new ones), then how long the shell gets to print its sentinel before we decide it is
# stuck in a loop of its own (``while :; do sleep 1; done``) and start a new one.
_KILL_ROUNDS_S = 0.5
_SHELL_GRACE_S = 1.0
# Output a background job writes between commands is shown with the next command; this
# bounds what we keep of it.
_PENDING_CAP = 1 << 16
_CHUNK = 1 << 16

# The holder: report readiness, then live until our end of its stdin closes.
_HOLDER = "echo ready; read -r _ ; exit 0"

# The agent's shell: an interactive bash whose stdin, stdout and stderr are a terminal that
# is also its controlling terminal, like the docker sandbox's shell and AgentBench's (``ls``
# formats for a tty, ``cat`` waits for terminal input until the timeout, errors read
# "bash: x: command not found", job control gives every job its own process group).
# Commands arrive NUL-terminated as "<nonce>\n<command>" on a separate pipe (fd $3) and run
# in this shell, so cwd, variables and jobs persist. ``jobs -p`` goes to a file before each
# command so a timeout can spare the background jobs started earlier. The sentinel
# "<nonce> <status>" follows the output on the terminal: a random nonce cannot be printed by
# accident. ``$?`` is set back to the last command's status before the next one runs.
_DRIVER = r"""
__au_fd=$3; exec {__au_in}<&"$__au_fd" {__au_out}>&1 {__au_fd}<&-
unset HISTFILE; set +H; PS1= PS2=
cd "$1" 2>/dev/null || cd /
__au_jobs=$2
set --
__au_st=0
while IFS= read -r -d '' -u "$__au_in" __au_msg; do
  __au_nonce=${__au_msg%%$'\n'*}
  jobs -p >"$__au_jobs" 2>/dev/null
  [ "$__au_st" = 0 ] || (exit "$__au_st")
  eval "${__au_msg#*$'\n'}"
  __au_st=$?
  printf '%s %d\n' "$__au_nonce" "$__au_st" >&"$__au_out"
done
"""


@dataclass
class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    cap: int
    head: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]

    def drop_partial_line(self) -> None:
        """Drop what follows the last newline: a new shell's first prompt."""
        cut = self.head.rfind(b"\n") + 1
        if cut < len(self.head) and self.total == len(self.head):
            self.total -= len(self.head) - cut
            del self.head[cut:]

    def result(self, exit_code: int | None, timed_out: bool, started: float) -> ExecResult:
        return ExecResult(
            output=bytes(self.head).decode("utf-8", errors="replace"),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=self.total > self.cap,
            output_bytes=self.total,
            duration_s=time.monotonic() - started,
        )


@dataclass
class _Level:
    """A shell the agent started that reads its terminal (``su - jack``, ``bash``, ``sh``).

    The driver is the bottom shell (it reads commands from a pipe); these read them from the
    terminal, as lines that run the command and print ``<nonce> <status>``."""

    pid: int
    """Host pid; with job control, also its process group."""
    name: str
    waiting: bytes | None = None
    """The marker of this shell's line that started the shell above it (still running)."""
    status: int = 0

    def line(self, command: str, nonce: str) -> bytes:
        restore = f"(exit {self.status}); " if self.status else ""  # $? as the last command left it
        head, tail = nonce[:5], nonce[5:]  # printed apart: the line itself never holds the marker
        if self.name in ("bash", "rbash"):
            text = f"{restore}eval {quote(command)}; builtin printf '%s%s %d\\n' {head} {tail} $?\n"
        else:
            posix = "'" + command.replace("'", "'\\''") + "'"
            text = f"{restore}eval {posix}; command printf '%s%s %d\\n' {head} {tail} \"$?\"\n"
        return text.encode("utf-8", "surrogateescape")


@dataclass
class _Shell:
    proc: subprocess.Popen[bytes]
    stdin: IO[bytes]
    fd: int
    """The terminal's master side: the commands' output and the sentinels."""
    exit_fd: int
    """A pidfd of the shell's process: readable once it has exited."""
    marker: bytes = b""
    """The sentinel prefix of the command in flight."""
    pending: bytearray = field(default_factory=bytearray)
    eof: bool = False
    settled: set[int] | None = None
    """The agent's processes (its own pid numbers) after the last command's runaway check."""
    init_pid: int | None = None
    """Host pid of the interactive bash, PID 1 of the agent's own pid namespace (once found)."""
    slave: str = ""
    """The terminal's path (to drop input no process read)."""
    nested: list[_Level] = field(default_factory=list)
    """Shells started in the driver's shell that read the terminal, innermost last."""
    found: bytes = b""
    """The marker whose sentinel ``_read_sentinel`` saw last."""

    def chain(self) -> list[int]:
        """Host pids from the session leader down to the interactive bash (nsenter, unshare, bash)."""
        found = [self.proc.pid]
        while len(found) < 3:
            kids = _children(found[-1])
            if not kids:
                break
            found.append(int(kids[0]))
        return found


@dataclass
class _Box:
    """One incarnation of the sandbox: private dirs, the namespaces' holder, the agent's shell.

    ``reset()`` resets a box in place when it can (:meth:`LocalSandbox._recycle`), else
    throws it away and continues in a fresh one (the warm spare when ready).
    """

    dir: Path
    """Holds ``w/`` (the writable dirs, bound into the sandbox) and ``root/`` (unshare's new root)."""
    holder: subprocess.Popen[bytes] | None = None
    ns_pid: int | None = None
    """Host pid of the namespaces' pid 1: what nsenter targets, and what reset kills."""
    shell: _Shell | None = None
    next_shell: Future[_Shell] | None = None
    """The next episode's shell, started in the background during this one (a reset in place
    takes it): in a pid, mount and IPC namespace of its own, idle, unseen by this episode."""
    mounts: frozenset[str] = frozenset()
    """The box's mount points once it started: a reset in place needs them unchanged."""
    tainted: bool = False
    """A process ran in the box's own namespaces rather than the agent's (no shell was up):
    what it left there is not known, so a reset replaces the box."""

    def writable(self, sandbox_dir: str) -> Path:
        return self.dir / "w" / sandbox_dir.lstrip("/")

    def map_writable(self, sandbox_path: str) -> Path | None:
        """The host path behind a normalised sandbox path, if it lies in a writable dir."""
        for d in WRITABLE_DIRS:
            if sandbox_path == d or sandbox_path.startswith(d + "/"):
                return self.writable(d) / sandbox_path[len(d):].lstrip("/")
        return None


def _scan_processes() -> Iterator[tuple[int, tuple[int, int]]]:
    """(pid, (process group, session)) of every process on the host."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _read_proc_stat(int(entry))
            if st is not None:
                yield int(entry), st


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def _proc_stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2:].split()


def _children_ints(pid: int) -> list[int]:
    return [int(child) for child in _children(pid)]


def _pids_in_namespace(ns_inode: int) -> Iterator[int]:
    """Host pids of the processes in the pid namespace with inode ``ns_inode``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == ns_inode:
                    yield int(entry)
            except OSError:
                continue


def _inner_pid(pid: int) -> int | None:
    """A host pid's pid in its innermost pid namespace (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return None


def _read_proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a host pid, or None if it is gone."""
    fields = _proc_stat_fields(pid)
    return None if fields is None else (int(fields[2]), int(fields[3]))


def _ns_pgid(pid: int) -> int | None:
    """The process group of a host pid as seen inside its innermost pid namespace."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpgid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return None


def _rmtree(path: Path) -> None:
    """Remove a tree the sandbox may have made unreadable (chmod 000 dirs)."""
    box_tmpfs.unmount_under(path)  # [limits] a box's bounded tmpfs goes first (its files with it)
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


def system_layout() -> list[tuple[str, str | None]]:
    """The host's :data:`SYSTEM_DIRS` that exist: (path, symlink target or None for a dir to bind)."""
    layout: list[tuple[str, str | None]] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            layout.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            layout.append((d, None))
    return layout


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


@functools.lru_cache(maxsize=1)
def _setup_script() -> str:
    return (_IMAGE_DIR / "setup.sh").read_text()


@functools.lru_cache(maxsize=1)
def agent_caps_argv() -> tuple[str, ...]:
    """The prefix, run inside the box, that leaves the agent's processes (root there) with
    :data:`AGENT_CAPABILITIES` only, as in the docker sandbox: root in a user namespace
    otherwise holds every capability over the box's namespaces (it could mount, remount the
    box's /dev, or change its network and hostname, and leave that to the next episode).
    Root's capabilities after ``exec`` are its bounding set; no inheritable ones, no new
    privileges from setuid files."""
    keep = ",".join(f"+{cap.lower()}" for cap in AGENT_CAPABILITIES)
    return (process.which("setpriv") or "/usr/bin/setpriv", f"--bounding-set=-all,{keep}", "--inh-caps=-all",
            "--no-new-privs", "--")


def _read_small_file(path: Path, limit: int = 1 << 16) -> bytes:
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


def _wait_readable(fd: int, timeout: float) -> bool:
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(timeout))


def _drop_xattrs(path: Path) -> None:
    """Remove the extended attributes (ACLs included) the agent may have set on ``path``."""
    with contextlib.suppress(OSError):
        for name in os.listxattr(path, follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.removexattr(path, name, follow_symlinks=False)


@functools.lru_cache(maxsize=1)
def bwrap_agent_argv() -> tuple[str, ...] | None:
    """The prefix that makes the agent's namespaces in one step when the box is bubblewrap's:
    bubblewrap again, run inside the box as its root (no new user namespace), with the
    same result as :data:`_AGENT_INIT` behind ``unshare``: new pid (the shell is PID 1) and
    IPC namespaces, a new mount namespace holding the box's mounts as they are, a new
    ``/proc`` with ``/proc/tty/driver`` hidden, the agent's capabilities and no new
    privileges; and a ``/dev`` of the agent's own (writable, as in a container, with its own
    ``/dev/pts`` and ``/dev/shm``), gone with the shell. Four processes fewer per shell than
    the ``unshare`` chain. None when this bubblewrap is too old for ``--chmod`` (before 0.5)."""
    tool = process.which("bwrap")
    if tool is None:
        return None
    try:
        helped = process.run([tool, "--help"], timeout=10.0)
    except (AgentUnitError, OSError):
        return None
    if b"--chmod" not in helped.stdout + helped.stderr:
        return None
    caps = [arg for cap in AGENT_CAPABILITIES for arg in ("--cap-add", f"CAP_{cap}")]
    return (tool, "--unshare-pid", "--unshare-ipc", "--as-pid-1", "--die-with-parent", "--dev-bind", "/", "/",
            "--proc", "/proc", "--tmpfs", "/proc/tty/driver", "--remount-ro", "/proc/tty/driver",
            "--dev", "/dev", "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm", "--chmod", "1777", "/dev/shm",
            "--cap-drop", "ALL", *caps, "--")


def _mount_points(pid: int) -> frozenset[str]:
    """The mount points of ``pid``'s mount namespace, as it sees them (empty if unreadable)."""
    try:
        with open(f"/proc/{pid}/mountinfo", "rb") as f:
            return frozenset(line.split()[4].decode("utf-8", "surrogateescape") for line in f)
    except OSError:
        return frozenset()


def drop_privileges_argv() -> list[str]:
    """The prefix that makes a root caller's sandbox processes run as :data:`ROOT_CALLER_UID`
    on the host (so root inside maps to an unprivileged uid); empty for a non-root caller."""
    if os.geteuid() != 0:
        return []
    uid = str(ROOT_CALLER_UID)
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _bwrap_system_args() -> list[str]:
    args: list[str] = []
    for path, link in system_layout():
        args += ["--symlink", link, path] if link is not None else ["--ro-bind", path, path]
    return args


_MASK_LOCK = threading.Lock()


def masked_system_dirs() -> tuple[str, ...]:
    """Dirs under the host's :data:`SYSTEM_DIRS` that the sandbox's root could not read.

    They are root-only on the host (``/usr/share/polkit-1/rules.d``), so inside, where their
    owner is unmapped, they are anyone's "other" and unreadable: ``find /`` would exit 1 with
    "Permission denied". Each box hides them under an empty read-only tmpfs (their content
    stays out of reach, as it was). Found once per process by walking the dirs (~0.2-1 s),
    under a lock: 16 sandboxes starting side by side each walked ``/usr`` at once, in 12 s.
    """
    with _MASK_LOCK:
        return _find_masked_system_dirs()


@functools.lru_cache(maxsize=1)
def _find_masked_system_dirs() -> tuple[str, ...]:
    found: list[str] = []
    for top, link in system_layout():
        if link is not None:
            continue
        for parent, dirs, _ in os.walk(top):
            keep = []
            for name in dirs:
                path = os.path.join(parent, name)
                try:
                    mode = os.lstat(path).st_mode
                except OSError:
                    continue
                if stat.S_ISDIR(mode) and mode & 0o005 != 0o005:
                    found.append(path)
                else:
                    keep.append(name)
            dirs[:] = keep
    return tuple(found)


def detect_isolation(preferred: Isolation = "auto") -> Literal["bwrap", "unshare"] | None:
    """Which namespace tool works on this machine, by running a tiny probe through the process seam.

    Args:
        preferred: ``auto`` tries bubblewrap then ``unshare``; ``bwrap``/``unshare`` probe only that one.

    Returns:
        ``"bwrap"``, ``"unshare"``, or None when neither can create the namespaces.
    """
    candidates: list[Literal["bwrap", "unshare"]] = ["bwrap", "unshare"] if preferred == "auto" else (
        [preferred] if preferred in ("bwrap", "unshare") else [])
    drop = drop_privileges_argv()
    if drop and process.which("setpriv") is None:
        return None  # root must not map to root inside: see _choose_mechanism's message
    for tool in candidates:
        if process.which(tool) is None:
            continue
        if tool == "bwrap":
            argv = [*drop, "bwrap", "--unshare-user", "--unshare-pid", "--unshare-net", "--uid", "0", "--gid", "0",
                    *_bwrap_system_args(), "--proc", "/proc", "--dev", "/dev", "true"]
        else:
            argv = [*drop, "unshare", "--user", "--map-root-user", "--pid", "--net", "--mount", "--fork", "true"]
        try:
            probe = process.run(argv, timeout=10.0)
        except (AgentUnitError, OSError) as exc:  # timed out, or not runnable after all
            logger.debug("isolation probe %s failed: %s", tool, exc)
            continue
        if probe.returncode == 0:
            return tool
        logger.debug("isolation probe %s exited %d: %s", tool, probe.returncode, probe.stderr[-300:])
    return None


_RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT)
"""Signals a shell started in the background inherits ignored (``nohup``, ``cmd &`` without job control)."""


def _default_signals_argv() -> list[str]:
    """``env --default-signal=INT,QUIT`` when this process ignores either, else nothing.

    The box's processes inherit our signal dispositions, and one that starts with SIGINT
    ignored cannot take it back: the agent's Ctrl-C (a nested shell's busy loop ended by the
    timeout, ``trap`` in its scripts) would then do nothing, unlike in a container, whose
    processes start from dockerd's defaults. Checked per process (a caller may change its
    handlers); the wrapper costs one exec, paid only when something is ignored."""
    if all(signal.getsignal(number) is not signal.SIG_IGN for number in _RESET_SIGNALS):
        return []
    return [_ENV_PROGRAM, "--default-signal=INT,QUIT"]


_ENV_PROGRAM = shutil.which("env") or "/usr/bin/env"


class LocalSandbox(Sandbox):
    """A sandbox made of Linux namespaces on this machine (no daemon).

    Example::

        with LocalSandbox() as sb:
            sb.shell("cd /tmp && export X=1")
            assert sb.shell("pwd; echo $X").output == "/tmp\\n1\\n"

    Args:
        isolation: ``auto`` (bubblewrap, else ``unshare``), ``bwrap``, ``unshare``, or
            ``none`` (no isolation at all; needs ``allow_unisolated=True``).
        allow_unisolated: run commands directly on the host when no isolation works. Only
            for trusted agents on throwaway machines: nothing protects the host then.
        pids_limit: the most processes the sandbox may have at once (default 512).
        memory: what the agent's processes may use: bytes or Docker's syntax (``"256m"``,
            ``"1g"``; default 1 GiB). Swap is off. Needs a cgroup (see :attr:`limits_off`).
        cpus: CPU time in cores (default 1).
        disk: what an episode may write to the writable dirs (default 1 GiB); past it,
            "No space left on device". Needs root (see :attr:`limits_off`).
        runaway_budget: most processes one shell command may leave running; when what it left
            keeps forking past this (a fork bomb), all of it is killed once the command returns
            or times out, so the next command can run. A few deliberate background jobs survive.
        network: share the host's network namespace (and its resolv.conf) instead of an empty
            one. Off by default: opt in only for tasks that must reach the network.
        workdir: the shell's and ``run()``'s initial directory.
        env: extra environment variables for the shell and ``run()``.
        temp_dir: where the private dirs are created (default: :func:`default_temp_parent`,
            ``/dev/shm`` when it is a shared tmpfs, else the system temp dir).
        warm_spare: start the next episode's shell in the background (and, after a reset
            that had to replace the box, the next box), so a reset does not wait for it.

    Raises:
        IsolationError: (on start) no namespace tool works and ``allow_unisolated`` is False.
        ConfigError: an option is invalid.
    """

    kind = "local"

    def __init__(self, *, isolation: Isolation = "auto", allow_unisolated: bool = False, pids_limit: int = 512,
                 workdir: str = "/root", env: Mapping[str, str] | None = None, temp_dir: str | None = None,
                 warm_spare: bool = True, runaway_budget: int = 32, network: bool = False,
                 memory: str | int | None = None, cpus: float | str | None = None,
                 disk: str | int | None = None) -> None:
        if runaway_budget < 1:
            raise ConfigError(f"runaway_budget must be >= 1, got {runaway_budget}.")
        if isolation not in ("auto", "bwrap", "unshare", "none"):
            raise ConfigError(f"isolation must be 'auto', 'bwrap', 'unshare' or 'none', got {isolation!r}.")
        if isolation == "none" and not allow_unisolated:
            raise ConfigError("isolation='none' runs agent commands directly on the host; "
                              "pass allow_unisolated=True as well if that is really intended.")
        # [limits] parsed and checked in one place for both backends
        self.limits: Limits = resolve_limits(memory=memory, cpus=cpus, pids=pids_limit, disk=disk)
        if not posixpath.isabs(workdir):
            raise ConfigError(f"workdir must be an absolute path, got {workdir!r}.")
        self.isolation_requested: Isolation = isolation
        self.allow_unisolated = allow_unisolated
        self.pids_limit = self.limits.pids
        self.runaway_budget = runaway_budget
        self.network = network
        self.workdir = workdir
        self.warm_spare = warm_spare
        self._env = {**_DEFAULT_ENV, **(env or {})}
        self._temp_parent = temp_dir
        self.mechanism: Literal["bwrap", "unshare", "none"] | None = None
        """The isolation in use once started."""
        self._layout = system_layout()
        self._owner_uid: int | None = ROOT_CALLER_UID if os.geteuid() == 0 and isolation != "none" else None
        """The host uid behind root inside, when the sandbox's files must be given to it (root callers)."""
        self._multi_user: bool | None = None  # decided on start (usermap), with the pids cgroup
        self._root: Path | None = None  # our temp dir: one sub-dir per box
        self._etc: Path | None = None  # the /etc template (shared by the process's sandboxes)
        self._cgroup: cgroup.BoxCgroup | None = None
        self._disk_bounded = False  # [limits] each box's dir is a tmpfs of `disk` bytes (box_tmpfs)
        self._limits_off: dict[str, str] = {}
        self._prlimit: str | None = None
        self._box: _Box | None = None
        self._state: dict[str, _CopyEntry] | None = None  # what a box's writable dirs start with
        self._etc_bound: list[tuple[str, Path]] | None = None  # the template's read-only binds
        self._spare: Future[_Box] | None = None
        self._worker: ThreadPoolExecutor | None = None  # builds the spare, deletes old dirs
        self._closed = False

    @property
    def multi_user(self) -> bool:
        """Whether the sandbox maps many users (``su``, ``chown jack``, ``runuser`` work): only when
        the caller is root, the host uid range is free and a pids cgroup bounds the sandbox
        (:mod:`~agentunit_gym.backends.sandbox.usermap`). Before ``start()``, what start will decide."""
        if self._multi_user is not None:
            return self._multi_user
        return self.isolation_requested != "none" and usermap.user_switching(self.isolation_requested).ok \
            and cgroup.controller_available("pids")

    @property
    def limits_off(self) -> dict[str, str]:
        """The limits this host cannot enforce (``memory``, ``cpu``, ``pids``, ``disk``), each with
        the reason; empty when all apply. Known after ``start()``."""
        return dict(self._limits_off)

    @property
    def host_dir(self) -> Path | None:
        """The sandbox's private temp dir on the host (all its writable dirs live under it);
        None before ``start()`` and after ``close()``."""
        return self._root

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Create the private dirs, the namespaces and the agent's shell (idempotent).

        Raises:
            IsolationError: no isolation available and no opt-in.
            BackendError / BackendTimeoutError: the sandbox did not come up.
        """
        if self._closed:
            raise BackendError("this LocalSandbox is closed; create a new one.")
        if self._box is not None:
            return
        if self.mechanism is None:
            self.mechanism = self._choose_mechanism()
            if self.mechanism == "none":
                self._owner_uid = None
        if self._root is None:
            parent = Path(self._temp_parent) if self._temp_parent else default_temp_parent()
            if self._owner_uid is not None:
                _check_traversable(parent, self._owner_uid)
            self._root = Path(tempfile.mkdtemp(prefix="agentunit-gym-local-", dir=parent))
            if self.mechanism != "none":
                # The template each box's /etc is copied from (its big trees bound read-only).
                self._etc = shared_etc_template(parent, self._owner_uid, self.network)
                if self._owner_uid is not None:
                    os.lchown(self._root, self._owner_uid, self._owner_uid)
            # [limits] the box's cgroup, the bounded tmpfs, and one warning for what is off
            self._cgroup = cgroup.BoxCgroup.create(self.limits)
            pids_cgroup = "pids" in self._cgroup.controllers
            self._prlimit = process.which("prlimit") if not pids_cgroup else None
            self._disk_bounded = self.mechanism != "none" and box_tmpfs.can_mount()
            self._limits_off = cgroup.limits_off(self._cgroup, self._disk_bounded, self.mechanism,
                                                 rlimit_nproc=self._prlimit is not None)
            cgroup.warn_limits_off(self._limits_off)
            self._multi_user = self._decide_multi_user()
            root_unbound = os.geteuid() == 0 and self._owner_uid is None  # unisolated root
            if not pids_cgroup and (root_unbound or self._prlimit is None):
                logger.warning("local sandbox: no writable pids cgroup and %s, so no process limit applies; "
                               "commands still time out.",
                               "running as root (RLIMIT_NPROC does not bind root)" if root_unbound
                               else "no `prlimit` (util-linux) to set RLIMIT_NPROC")
        self._box = self._take_spare() or self._make_box()
        self._launch_next_shell(self._box)

    def reset(self) -> None:
        """Kill every process of the episode, discard what it wrote, and start a new shell.

        In place when that is safe (:meth:`_recycle`: the box keeps its holder and namespaces),
        else in a new box (the warm spare when it is ready): new namespaces, dirs and shell.

        Raises:
            BackendError / BackendTimeoutError: the new sandbox did not come up.
        """
        if self._closed:
            raise BackendError("this LocalSandbox is closed; create a new one.")
        box, self._box = self._box, None
        if box is not None:
            try:
                if self._recycle(box):
                    self._box = box
                    return
            except (BackendError, BackendTimeoutError, OSError) as exc:
                # OSError: putting the dirs back failed (a full tmpfs): the box goes, as any other.
                logger.warning("local sandbox: resetting the box in place failed (%s); starting a new one", exc)
            # Killing is synchronous: nothing of the old episode runs once reset returns.
            # Deleting its files is not (it costs 5-20 ms here); they are out of sight already.
            self._stop_box(box)
            self._in_background(_rmtree, box.dir)
        self.start()
        self._launch_spare()  # for the next reset that cannot be done in place

    def close(self) -> None:
        """Kill every process, remove the temp dirs and the cgroup. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            box, self._box = self._box, None
            if box is not None:
                self._stop_box(box)
        finally:
            if self._worker is not None:
                # Let the spare finish starting (its start has a deadline) and old dirs go.
                self._worker.shutdown(wait=True)
                self._worker = None
            spare, self._spare = self._spare, None
            if spare is not None and spare.exception() is None:
                self._stop_box(spare.result())
            if self._cgroup is not None:
                if not self._cgroup.remove(time.monotonic() + _KILL_TIMEOUT_S):
                    logger.warning("could not remove cgroup %s (processes still exiting)", self._cgroup.dirs)
                self._cgroup = None
            if self._root is not None:
                _rmtree(self._root)
                self._root = None
            etc, self._etc = self._etc, None
            if etc is not None:
                release_etc_template(etc)

    def __del__(self) -> None:  # last resort: do not leave a holder behind
        with contextlib.suppress(Exception):
            if not getattr(self, "_closed", True):
                self.close()

    def _decide_multi_user(self) -> bool:
        if self.mechanism == "none":
            return False
        support = usermap.user_switching(self.mechanism or "auto")
        if support.ok and (self._cgroup is None or "pids" not in self._cgroup.controllers):
            # RLIMIT_NPROC counts per uid: with many users it would no longer bound the sandbox.
            support = usermap.Support(False, "no writable pids cgroup to bound the sandbox's processes")
        logger.debug("local sandbox: %s user: %s", "many" if support.ok else "one", support.reason)
        return support.ok

    def _choose_mechanism(self) -> Literal["bwrap", "unshare", "none"]:
        if self.isolation_requested == "none":
            return "none"
        tools = ("nsenter", "setsid", "unshare", "setpriv")
        missing = [tool for tool in tools if process.which(tool) is None]
        if missing and not self.allow_unisolated:
            raise IsolationError(f"the local sandbox needs {' and '.join(missing)} (util-linux) to enter its "
                                 "namespaces and limit the agent's capabilities"
                                 + (" (and, as root, to map root inside to an unprivileged host uid)"
                                    if "setpriv" in missing and drop_privileges_argv() else "")
                                 + "; install util-linux, or use backend='docker'.")
        found = detect_isolation(self.isolation_requested) if not missing else None
        if found is not None:
            return found
        if self.allow_unisolated:
            logger.warning("local sandbox: no namespace isolation available; running commands UNISOLATED "
                           "on the host (allow_unisolated=True).")
            return "none"
        wanted = "bubblewrap or unshare" if self.isolation_requested == "auto" else self.isolation_requested
        raise IsolationError(
            f"the local sandbox needs Linux namespaces, but {wanted} could not create them here. "
            "Install bubblewrap (apt-get install bubblewrap), or enable unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0; on Ubuntu 24.04+ also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or use backend='docker'. To run agent commands "
            "directly on the host with no protection, pass allow_unisolated=True."
        )

    # ------------------------------------------------------------------ boxes and the warm spare

    def _in_background(self, fn: Callable[..., object], *args: object) -> Future[Any]:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentunit-gym-local")
        return self._worker.submit(fn, *args)

    def _launch_spare(self) -> None:
        if self.warm_spare and self.mechanism != "none" and self._spare is None and not self._closed:
            self._spare = self._in_background(self._make_box)

    def _take_spare(self) -> _Box | None:
        """The warm spare if it came up and is still alive; None otherwise (then a new box is made)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            box = spare.result(timeout=_START_TIMEOUT_S + _KILL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the spare means: make a box now
            logger.debug("local sandbox: warm spare unusable (%s); starting a new one", exc)
            return None
        if not self._box_alive(box) or box.shell is None or box.shell.proc.poll() is not None:
            self._stop_box(box)
            self._in_background(_rmtree, box.dir)
            return None
        return box

    def _make_box(self) -> _Box:
        """New private dirs, namespaces and a ready shell (runs in the background for spares)."""
        assert self._root is not None
        box = _Box(Path(tempfile.mkdtemp(prefix="box-", dir=self._root)))
        try:
            if self._disk_bounded:  # [limits] every writable dir of the box on one tmpfs of `disk` bytes
                box_tmpfs.mount(box.dir, self.limits.disk, uid=self._owner_uid)
            (box.dir / "root").mkdir()  # the new root's mount point (unshare path)
            (box.dir / "w").mkdir()
            for d in WRITABLE_DIRS:
                box.writable(d).mkdir()
            self._fill(box)
            if self._owner_uid is not None:
                _chown_tree(box.dir, self._owner_uid)
                if self._multi_user:  # /home/agent is agent's, as in the docker image
                    usermap.give_homes(box.writable("/etc"), box.writable("/home"))
            if self.mechanism != "none":
                try:
                    self._start_holder(box)
                except BackendError as exc:
                    # Seen once under heavy mount churn from a busy Docker daemon: try once more.
                    logger.warning("local sandbox: retrying start after: %s", exc)
                    self._stop_box(box)
                    self._start_holder(box)
                assert box.ns_pid is not None
                box.mounts = _mount_points(box.ns_pid)
            box.shell = self._shell_ready(box)
        except BaseException:
            self._stop_box(box)
            _rmtree(box.dir)
            raise
        return box

    def _shell_ready(self, box: _Box) -> _Shell:
        """A new agent's shell for ``box`` that has answered once, so the first command of the
        episode does not pay bash's start-up."""
        shell = self._start_shell(box)
        try:
            self._send(shell, "true")
            if self._read_sentinel(shell, [shell.marker], _Capture(0), time.monotonic() + _START_TIMEOUT_S) is None:
                raise BackendTimeoutError(f"the local sandbox's shell did not answer within {_START_TIMEOUT_S:g} s.")
        except BaseException:
            self._end_shell(shell)
            raise
        return shell

    def _launch_next_shell(self, box: _Box) -> None:
        """Start the next episode's shell in the background (with ``warm_spare``)."""
        if self.warm_spare and self.mechanism != "none" and box.next_shell is None and not self._closed:
            box.next_shell = self._in_background(self._shell_ready, box)

    def _take_next_shell(self, box: _Box) -> _Shell | None:
        """The shell :meth:`_launch_next_shell` started, if it came up and still lives."""
        future, box.next_shell = box.next_shell, None
        if future is None:
            return None
        try:
            shell = future.result(timeout=_START_TIMEOUT_S + _KILL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of it means: start one now
            logger.debug("local sandbox: the next shell is unusable (%s); starting one", exc)
            self._end_when_up(future)  # if it comes up after all
            return None
        if shell.proc.poll() is not None:
            self._end_shell(shell)
            return None
        return shell

    def _drop_next_shell(self, box: _Box) -> None:
        future, box.next_shell = box.next_shell, None
        if future is not None:
            self._end_when_up(future)

    def _end_when_up(self, future: Future[_Shell]) -> None:
        """End the shell ``future`` starts, once (and if) it is up."""
        future.add_done_callback(lambda done: done.exception() is None and self._end_shell(done.result()))

    def _start_state(self) -> dict[str, _CopyEntry]:
        """What the writable dirs hold as an episode starts (the dirs themselves aside), by path
        under ``w/``, parents first: /etc's copy of the template (each of its read-only trees an
        empty dir, the mount point) and the /var, /run and /home skeleton."""
        if self._state is None:
            entries: list[_CopyEntry] = []
            if self.mechanism != "none":
                assert self._etc is not None
                entries += [(f"etc/{rel}", kind, mode, payload) for rel, kind, mode, payload in _etc_copy(self._etc)]
            for rel, what in _SKELETON:
                entries.append((rel, "link", 0o777, what) if isinstance(what, str) else (rel, "dir", what, b""))
            self._state = {entry[0]: entry for entry in entries}
        return self._state

    def _fill(self, box: _Box, kept: frozenset[str] = frozenset()) -> None:
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
        if self._owner_uid is not None:
            for path in made:
                os.lchown(path, self._owner_uid, self._owner_uid)
        if self._multi_user:  # /home/agent is agent's, as in the docker image
            usermap.give_homes(box.writable("/etc"), box.writable("/home"))

    def _recycle(self, box: _Box) -> bool:
        """Reset ``box`` in place, as the docker supervisor resets its container: kill the
        agent's pid namespace (every process of the episode; its mount and IPC namespaces and
        its /dev/shm go with it), put the writable dirs back as they started (:meth:`_clear`,
        :meth:`_fill`) and take the next episode's shell (started in the background, or now).
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
        if self.mechanism == "none" or box.tainted or not box.mounts or box.shell is None \
                or not self._box_alive(box):
            return False
        init = self._agent_init(box)
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
        self._stop_shell(box)
        assert box.ns_pid is not None
        if _mount_points(box.ns_pid) != box.mounts or not self._box_alive(box):
            return False
        self._fill(box, self._clear(box))
        box.shell = self._take_next_shell(box) or self._shell_ready(box)
        self._launch_next_shell(box)
        return True

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
        mounts = {f"etc/{rel}" for rel, _ in self._etc_read_only()} if self.mechanism != "none" else set()
        on_the_way: set[str] = set()
        for path in mounts:
            parent = posixpath.dirname(path)
            while parent != "etc" and parent not in on_the_way:
                on_the_way.add(parent)
                parent = posixpath.dirname(parent)
        uid = self._owner_uid if self._owner_uid is not None else os.getuid()
        gid = self._owner_uid if self._owner_uid is not None else os.getgid()
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
            with open(path, "rb") as f:
                return f.read(len(data) + 1) == data

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
            if self._disk_bounded:  # [limits] the space is back when reset returns (one tmpfs per box)
                _rmtree(trash)
            else:
                self._in_background(_rmtree, trash)
        return frozenset(kept)

    def _current(self) -> _Box:
        self.start()
        assert self._box is not None
        return self._box

    # ------------------------------------------------------------------ processes

    def _spawn(self, argv: Sequence[str], *, stdin: int | IO[bytes], stdout: int, stderr: int,
               in_sandbox: bool, pass_fds: tuple[int, ...] = (), tty: str | None = None) -> subprocess.Popen[bytes]:
        """Start a process in its own session: the one place this module creates processes.
        With ``tty`` (a terminal's path), that terminal becomes the session's controlling
        terminal (for the agent's shell: job control).

        Every process joins the pids cgroup when there is one. Without it, ``in_sandbox``
        processes get RLIMIT_NPROC instead, set before they enter the user namespace so it
        counts the sandbox's processes only; the holder never gets it (an RLIMIT_NPROC set
        when a user namespace is created also caps the caller's own processes). Both are set
        by a tiny exec wrapper rather than ``preexec_fn``, which would cost a full fork of
        this process (~2 ms more per process).
        """
        if self.mechanism != "none":
            argv = [*drop_privileges_argv(), *argv]
        new_session = True
        if self._cgroup is not None and self._cgroup.dirs:
            # A session leader that opens a terminal gets it as its controlling terminal: the
            # wrapper does that as well, which saves a `setsid --ctty` process.
            # [limits] the agent's processes, not the holder, are the OOM killer's choice.
            argv = self._cgroup.join_argv(argv, tty=tty, oom_score_adj=AGENT_OOM_SCORE_ADJ if in_sandbox else None)
        else:
            if tty is not None:
                argv = ["setsid", "--ctty", *argv]
                new_session = False  # setsid makes the session (a group leader would have it fork)
            if in_sandbox and self._prlimit is not None:
                argv = [self._prlimit, f"--nproc={self.pids_limit}:{self.pids_limit}", "--", *argv]
        argv = [*_default_signals_argv(), *argv]
        try:
            return subprocess.Popen(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=self._env,
                                    start_new_session=new_session, close_fds=True, pass_fds=pass_fds)
        except OSError as exc:
            raise BackendError(f"could not start {argv[0]!r} for the local sandbox: {exc}") from exc

    def _etc_read_only(self) -> list[tuple[str, Path]]:
        """(path under /etc, template path) of the template's trees and files bound read-only
        into each box (looked up once: the template does not change)."""
        assert self._root is not None
        assert self._etc is not None
        if self._etc_bound is None:
            self._etc_bound = [(rel, self._etc / rel) for rel in ETC_READ_ONLY if (self._etc / rel).is_dir()] \
                + [(rel, self._etc / rel) for rel in ETC_READ_ONLY_FILES if (self._etc / rel).is_file()]
        return self._etc_bound

    def _holder_argv(self, box: _Box) -> list[str]:
        # Many users: the user namespace is made unmapped and waits in usermap.GATE until
        # _start_holder has written its uid/gid range; bwrap then runs as root in it (it makes
        # the other namespaces itself, no user namespace of its own).
        users = ["unshare", "--user", "/bin/sh", "-c", usermap.GATE, "gate"] if self._multi_user else []
        if self.mechanism == "bwrap":
            own_user = [] if self._multi_user else ["--unshare-user", "--uid", "0", "--gid", "0"]
            argv = [*users, "bwrap", *own_user, "--unshare-pid", *([] if self.network else ["--unshare-net"]),
                    "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                    "--hostname", "sandbox", *_bwrap_system_args(), "--proc", "/proc", "--dev", "/dev"]
            for d in WRITABLE_DIRS:
                argv += ["--bind", str(box.writable(d)), d]
            for rel, template in self._etc_read_only():
                argv += ["--ro-bind", str(template), f"/etc/{rel}"]
            for path in masked_system_dirs():
                argv += ["--tmpfs", path, "--remount-ro", path]
            return argv + ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/", "/bin/sh", "-c", _HOLDER]
        specs = [f"link:{path}:{link}" if link is not None else f"bind:{path}" for path, link in system_layout()]
        specs += [f"etc:{template}:/etc/{rel}" for rel, template in self._etc_read_only()]
        specs += [f"mask:{path}" for path in masked_system_dirs()]
        gate = ["/bin/sh", "-c", usermap.GATE, "gate"] if self._multi_user else []
        return ["unshare", "--user", *([] if self._multi_user else ["--map-root-user"]), "--pid",
                *([] if self.network else ["--net"]), "--mount", "--ipc", "--uts",
                "--fork", "--kill-child", "--propagation", "private", *gate, "/bin/bash", "-c", _setup_script(),
                "setup", str(box.dir / "root"), str(box.dir / "w"), _HOLDER, *specs]

    def _start_holder(self, box: _Box) -> None:
        holder = self._spawn(self._holder_argv(box), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, in_sandbox=False)
        box.holder = holder
        assert holder.stdin is not None and holder.stdout is not None and holder.stderr is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        try:
            line = self._read_line(holder.stdout.fileno(), deadline)
            if line == b"map" and self._multi_user:
                line = self._map_users(holder, deadline)
            if line != b"ready":
                holder.kill()
                err = b""
                with contextlib.suppress(Exception):
                    holder.wait(timeout=_KILL_TIMEOUT_S)
                    err = holder.stderr.read()[-600:]
                raise BackendError(f"the {self.mechanism} sandbox did not start: "
                                   f"{err.decode('utf-8', 'replace').strip() or 'no output'}")
        finally:
            holder.stdout.close()
            holder.stderr.close()
        # The namespace's pid 1 (bwrap's init, or our setup shell under unshare) is the
        # holder's child; the wrapper that joined the cgroup has exec'd into the holder.
        try:
            children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()
        except OSError:
            children = []
        if not children:
            raise BackendError(f"the {self.mechanism} sandbox started but its namespace process was not found.")
        box.ns_pid = int(children[0])

    def _map_users(self, holder: subprocess.Popen[bytes], deadline: float) -> bytes:
        """Write the user namespace's uid/gid range (the holder waits in usermap.GATE), let it go
        on, and return its next line (``ready``). A failure kills it: nothing runs unmapped."""
        assert holder.stdin is not None and holder.stdout is not None
        target = holder.pid
        if self.mechanism == "unshare":  # unshare --fork: the gate runs in its child
            for _ in range(100):
                children = _children_ints(holder.pid)
                if children or time.monotonic() > deadline:
                    break
                time.sleep(0.001)
            if not children:
                raise BackendError("the unshare sandbox's user namespace process was not found.")
            target = children[0]
        try:
            usermap.write_maps(target)
            holder.stdin.write(b"go\n")
            holder.stdin.flush()
        except OSError as exc:
            holder.kill()
            raise BackendError(f"could not map the local sandbox's users (host ids {usermap.BASE}-"
                               f"{usermap.BASE + usermap.COUNT - 1}): {exc}") from exc
        return self._read_line(holder.stdout.fileno(), deadline)

    @staticmethod
    def _read_line(fd: int, deadline: float) -> bytes:
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendTimeoutError(f"the local sandbox did not start within {_START_TIMEOUT_S:g} s.")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                buf += chunk
        return buf.split(b"\n", 1)[0]

    def _enter_argv(self, box: _Box, argv: Sequence[str], *, new_shell: bool = False) -> list[str]:
        """``argv`` to run inside the sandbox (or on the host when unisolated): in the agent's
        namespaces with the agent's capabilities; with ``new_shell``, in the box's own namespaces
        with all of root's there (what the agent's shell starts from)."""
        if self.mechanism == "none":
            # On the host: at least keep HOME and temp files in the box's private dirs.
            return ["/usr/bin/env", f"HOME={box.writable('/root')}", f"TMPDIR={box.writable('/tmp')}", *argv]
        assert box.ns_pid is not None
        # Into the agent's own pid namespace (and its /proc, /dev/shm, IPC) once its shell is
        # up, else the box's.
        target = None if new_shell else self._agent_init(box)
        if target is None and not new_shell:
            box.tainted = True
        # With network=True the sandbox is in the host's network namespace, which we may not enter.
        return ["nsenter", "-t", str(target or box.ns_pid), "-U", "-m", "-p", *([] if self.network else ["-n"]), "-i",
                "-u", "-r", "--preserve-credentials", "--",
                *(argv if new_shell else [*agent_caps_argv(), "/usr/bin/env", f"--chdir={self.workdir}", *argv])]

    @staticmethod
    def _agent_init(box: _Box) -> int | None:
        """Host pid of the agent's shell, PID 1 of the agent's pid namespace; None when there is none."""
        shell = box.shell
        if shell is None or shell.eof:
            return None
        if shell.init_pid is None:
            chain = shell.chain()
            if len(chain) == 3:  # nsenter, its child unshare, unshare's child: the shell
                shell.init_pid = chain[2]
        if shell.init_pid is not None and _proc_stat_fields(shell.init_pid) is None:
            return None
        return shell.init_pid

    def _workdir_in(self, box: _Box) -> str:
        return str(box.writable("/root")) if self.mechanism == "none" else self.workdir

    def _jobs_file(self, box: _Box) -> str:
        """Where the driver lists the shell's jobs, as the shell sees the path."""
        return str(box.writable("/run") / "jobs") if self.mechanism == "none" else "/run/.agentunit-gym-jobs"

    def _start_shell(self, box: _Box) -> _Shell:
        if self.mechanism == "none":
            os.makedirs(self._workdir_in(box), exist_ok=True)
        master, slave = os.openpty()
        slave_name = os.ttyname(slave)
        control_read, control_write = os.pipe()
        try:
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n": output bytes arrive as written
            attrs[3] &= ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            # The terminal is the session's controlling terminal (_spawn's `tty`), so the
            # interactive bash gets real job control (and reports like the docker shell).
            shell = ["/bin/bash", "--noprofile", "--norc", "-i", "-c", _DRIVER, "bash",
                     self._workdir_in(box), self._jobs_file(box), str(control_read)]
            # The shell is PID 1 of a pid namespace of its own, with its own /proc: the agent
            # sees its shell and what it starts (and run()'s commands, which join it), not
            # the box's holder processes: the view of `docker run IMAGE bash`. Its mount and
            # IPC namespaces are its own too, so what it leaves there ends with it.
            inside = bwrap_agent_argv() if self.mechanism == "bwrap" else None
            if inside is not None:
                shell = [*inside, *shell]
            elif self.mechanism != "none":
                shell = ["unshare", "--pid", "--fork", "--mount-proc", "--ipc", "--kill-child", "--", "/bin/sh", "-c",
                         _AGENT_INIT, "sh", *agent_caps_argv(), *shell]
            proc = self._spawn(self._enter_argv(box, shell, new_shell=True), stdin=slave, stdout=slave, stderr=slave,
                               in_sandbox=True, pass_fds=(control_read,), tty=slave_name)
        except BaseException:
            os.close(master)
            os.close(control_write)
            raise
        finally:
            os.close(slave)
            os.close(control_read)
        os.set_blocking(master, False)
        return _Shell(proc, os.fdopen(control_write, "wb"), master, os.pidfd_open(proc.pid), slave=slave_name)

    def _box_alive(self, box: _Box) -> bool:
        if self.mechanism == "none":
            return True
        if box.holder is None or box.holder.poll() is not None or box.ns_pid is None:
            return False
        # The namespace's init may be dead (a zombie) before the holder notices.
        fields = _proc_stat_fields(box.ns_pid)
        if fields is None:
            return False
        # Dead, or on its way out (PF_EXITING: killed, now taking the namespace down).
        return fields[0] not in (b"Z", b"X") and not int(fields[6]) & 0x4

    def _stop_shell(self, box: _Box) -> None:
        shell, box.shell = box.shell, None
        if shell is not None:
            self._end_shell(shell)

    @staticmethod
    def _end_shell(shell: _Shell) -> None:
        """Kill a shell (its session) and wait for it, with a deadline; close our ends."""
        # The session leader's group, and the interactive bash's own group.
        for group in (shell.proc.pid, *(int(pid) for pid in _children(shell.proc.pid))):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            shell.stdin.close()
        try:
            shell.proc.wait(timeout=_KILL_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise BackendTimeoutError("the local sandbox's shell did not exit after SIGKILL.") from exc
        finally:
            for fd in (shell.fd, shell.exit_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _stop_box(self, box: _Box) -> None:
        """Kill the box's shell and every process of its namespaces, and wait for them (with a deadline)."""
        deadline = time.monotonic() + _KILL_TIMEOUT_S
        self._drop_next_shell(box)
        try:
            if self.mechanism == "none" and box.shell is not None:
                # No pid namespace: kill the shell's session (daemons that left it escape).
                for pid, (_, session) in _scan_processes():
                    if session == box.shell.proc.pid:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
            if box.ns_pid is not None:
                # SIGKILL to the pid namespace's init makes the kernel kill all its processes.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(box.ns_pid, signal.SIGKILL)
            self._stop_shell(box)
        finally:
            box.ns_pid = None
            holder, box.holder = box.holder, None
            if holder is not None:
                with contextlib.suppress(OSError):
                    if holder.stdin is not None:
                        holder.stdin.close()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(holder.pid, signal.SIGKILL)
                try:
                    holder.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired as exc:
                    raise BackendTimeoutError(f"the local sandbox's holder (pid {holder.pid}) did not exit "
                                              "after SIGKILL.") from exc

    # ------------------------------------------------------------------ the agent's shell

    def shell(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """Run ``command`` in the agent's persistent bash.

        On timeout the process groups the command started are killed (background jobs of
        earlier commands are spared) and the shell stays usable; if the shell itself is
        stuck (a loop of builtins), it is replaced by a new one and the output says so.

        Raises:
            BackendError: the sandbox died (call ``reset()``).
        """
        if timeout <= 0 or max_output < 0:
            raise ConfigError(f"timeout must be > 0 and max_output >= 0, got {timeout!r}, {max_output!r}.")
        self.start()  # [limits] the cgroup exists from here on
        oom_kills = self._cgroup.oom_kills() if self._cgroup is not None else -1  # [limits]
        result = self._shell(command, timeout, max_output)
        if oom_kills >= 0 and self._cgroup is not None and self._cgroup.oom_kills() > oom_kills:  # [limits]
            result = add_memory_note(result, self.limits)
        if result.exit_code not in (0, None) and self.mechanism != "none" and not self._multi_user \
                and any(message in result.output for message in _USER_SWITCH_FAILURES):
            result = dataclasses.replace(result, output=result.output + USER_SWITCH_NOTE)
        return result

    def _shell(self, command: str, timeout: float, max_output: int) -> ExecResult:
        box = self._current()
        shell = box.shell
        if shell is None:
            raise self._died_error()
        started = time.monotonic()
        capture = _Capture(max_output)
        if shell.pending:
            capture.add(bytes(shell.pending))
            shell.pending.clear()
        # What was there when the last command was settled: processes forked since by its
        # background jobs count as new too, so a bomb that started slowly is caught later.
        before = shell.settled if shell.settled is not None else self._ns_pids(box)
        try:
            if shell.nested:
                marker = self._send_tty(shell, command, started + timeout)
            else:
                self._send(shell, command)
                marker = shell.marker
        except OSError:  # broken pipe: the shell is gone
            shell.eof = True
            return self._shell_died(box, capture, started, timed_out=False)
        rejected: set[int] = set()
        hit: list[tuple[int, str]] = []
        while True:
            hit.clear()
            status = self._read_sentinel(shell, [marker, *self._waiting(shell)], capture, started + timeout,
                                         watch=lambda: self._new_shell(box, shell, rejected, hit))
            if status is not None or not hit:
                break
            entered = self._enter_nested(box, shell, marker, capture, hit[0], started + timeout)
            if entered is True:  # the new shell took over; the command runs on below it
                self._contain_runaways(box, before, capture)
                shell.settled = self._ns_pids(box)
                return capture.result(0, False, started)
            if entered is not None:
                status = entered
                break
            rejected.add(hit[0][0])
        if status is not None:
            self._settle(shell, status)
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
            return capture.result(status, False, started)
        if shell.eof:
            return self._shell_died(box, capture, started, timed_out=False)
        if shell.nested and self._stop_nested(box, shell, capture, marker):
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
            return capture.result(None, True, started)
        # Timed out: kill what the command started, then let the shell report back.
        self._kill_command_groups(box, shell, before)
        status = self._read_sentinel(shell, [shell.marker], capture, time.monotonic() + _SHELL_GRACE_S)
        shell.nested.clear()
        if status is None:
            if shell.eof:
                return self._shell_died(box, capture, started, timed_out=True)
            self._stop_shell(box)
            self._kill_command_groups(box, shell, before)  # what the loop had started meanwhile
            if not self._box_alive(box):
                raise self._died_error()
            box.shell = self._start_shell(box)
            capture.add(b"\n[the command did not stop; a new shell was started: cwd, variables and jobs were reset]")
        else:
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
        return capture.result(None, True, started)

    @staticmethod
    def _discard_pending(shell: _Shell) -> None:
        """Drop output waiting on the terminal (it would open the next command's output)."""
        shell.pending.clear()
        deadline = time.monotonic() + 0.2
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_READ)
            while time.monotonic() < deadline and sel.select(0.02):
                try:
                    if not os.read(shell.fd, _CHUNK):
                        return
                except BlockingIOError:
                    continue
                except OSError:
                    return

    def _ns_pids(self, box: _Box) -> set[int]:
        """The pids of the box's pid namespace, as its own /proc lists them (empty when unisolated)."""
        if self.mechanism == "none" or box.ns_pid is None:
            return set()
        try:
            view = self._agent_init(box) or box.ns_pid
            return {int(entry) for entry in os.listdir(f"/proc/{view}/root/proc") if entry.isdigit()}
        except OSError:
            return set()

    def _contain_runaways(self, box: _Box, before: set[int], capture: _Capture) -> None:
        """Kill what the last command left running when it is a flood (``runaway_budget``).

        What the command left (processes of the box's pid namespace not in ``before``) is
        watched while it grows: a fork bomb doubles every few ms, a server started with ``&``
        stays put. Past the budget, or with the pids limit nearly reached, every process the
        command created is killed, in rounds until none is left, and the output says so.
        """
        if self.mechanism == "none" or not before:
            return
        deadline = time.monotonic() + _RUNAWAY_WATCH_S
        seen, still = 0, 0
        while True:
            new = self._ns_pids(box) - before
            if not new:
                return
            if len(new) > self.runaway_budget or len(new) + len(before) >= self.pids_limit * 9 // 10:
                break
            still = still + 1 if len(new) <= seen else 0
            if still >= 3 or time.monotonic() > deadline:
                return  # stable over a few looks (a busy machine forks slowly): a deliberate job
            seen = max(seen, len(new))
            time.sleep(0.015)
        assert box.ns_pid is not None
        try:
            ns = os.stat(f"/proc/{self._agent_init(box) or box.ns_pid}/ns/pid").st_ino
        except OSError:
            return
        shell_group = box.shell.proc.pid if box.shell is not None else -1
        killed: set[int] = set()
        end = time.monotonic() + _KILL_TIMEOUT_S
        while time.monotonic() < end:
            targets = [pid for pid in _pids_in_namespace(ns)
                       if _inner_pid(pid) not in before and (_proc_stat_fields(pid) or [b"Z"])[0] != b"Z"]
            if not targets:
                break
            for pid in targets:
                st = _read_proc_stat(pid)
                # OSError: the process is exiting (its stat may then show group 0: never signal that,
                # it would mean our own group).
                with contextlib.suppress(OSError):
                    if st is not None and st[0] > 1 and st[0] not in (shell_group, *_children_ints(shell_group)):
                        os.killpg(st[0], signal.SIGKILL)  # the whole group at once: it stops forking
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.002)
        if box.shell is not None:  # what the killed processes printed ("fork: retry: ...") is noise now
            self._discard_pending(box.shell)
        capture.add(f"\n[{len(killed)} processes this command left running were killed: more than "
                    f"{self.runaway_budget} were still forking]\n".encode())

    @staticmethod
    def _send(shell: _Shell, command: str) -> None:
        """Send one command to the driver, under a fresh random nonce."""
        nonce = "__au_" + secrets.token_hex(8)
        shell.marker = nonce.encode() + b" "
        shell.stdin.write(nonce.encode() + b"\n" + command.replace("\0", "").encode("utf-8", "surrogateescape")
                          + b"\0")
        shell.stdin.flush()

    def _read_sentinel(self, shell: _Shell, markers: list[bytes], capture: _Capture, deadline: float,
                       watch: Callable[[], bool] | None = None) -> int | None:
        """Read the shell's output into ``capture`` until one of the ``markers``' sentinels (it is
        then ``shell.found``); its exit status, or None (deadline passed; the shell exited: then
        ``shell.eof`` is set; or ``watch``, called when the terminal is quiet, returned True)."""
        carry = b""
        keep = max(len(marker) for marker in markers) + 16  # enough to hold a sentinel split across reads
        quiet = 0.02 if watch is not None else None
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_READ)
            # Background jobs may hold the terminal open after the shell is gone, so the
            # shell's end is watched on its pidfd, not on the terminal.
            sel.register(shell.exit_fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    capture.add(carry)
                    return None
                events = sel.select(left if quiet is None else min(left, quiet))
                if not events:
                    if watch is not None and watch():
                        capture.add(carry)
                        return None
                    continue
                chunk = b""
                with contextlib.suppress(BlockingIOError):
                    try:
                        chunk = os.read(shell.fd, _CHUNK)
                    except OSError:  # EIO: nothing holds the terminal any more
                        chunk = b""
                if not chunk:
                    if any(key.fd == shell.exit_fd for key, _ in events) or shell.proc.poll() is not None:
                        capture.add(carry)
                        shell.eof = True
                        return None
                    continue
                data = carry + chunk
                found = [(data.find(marker), marker) for marker in markers]
                idx, marker = min(((i, m) for i, m in found if i >= 0), default=(-1, b""))
                if idx >= 0:
                    end = data.find(b"\n", idx)
                    if end < 0:
                        carry = data  # the status digits are still coming
                        continue
                    capture.add(data[:idx])
                    shell.pending += data[end + 1:][:_PENDING_CAP]
                    shell.found = marker
                    try:
                        return int(data[idx + len(marker):end])
                    except ValueError:
                        return -1
                cut = max(0, len(data) - keep)
                capture.add(data[:cut])
                carry = data[cut:]

    # ------------------------------------------------------------------ shells that nest

    @staticmethod
    def _waiting(shell: _Shell) -> list[bytes]:
        """The markers of the lines still running below the top shell (their sentinel means the
        shells above them have exited): the driver's command, then each nested shell's."""
        if not shell.nested:
            return []
        return [shell.marker, *(level.waiting for level in shell.nested[:-1] if level.waiting is not None)]

    def _new_shell(self, box: _Box, shell: _Shell, rejected: set[int], hit: list[tuple[int, str]]) -> bool:
        """True (and the shell in ``hit``) when a shell that is not one of ours yet waits at the
        terminal, seen so twice in a row (20 ms apart)."""
        try:
            group = os.tcgetpgrp(shell.fd)
        except OSError:
            return False
        known = {self._agent_init(box), shell.proc.pid, *(level.pid for level in shell.nested), *rejected}
        name = None if group in known else interactive_shell(group)  # a shell leads its own group
        if name is None:
            hit.clear()
            return False
        if hit and hit[0][0] == group:
            return True
        hit[:] = [(group, name)]
        return False

    def _send_tty(self, shell: _Shell, command: str, deadline: float) -> bytes:
        """Write ``command`` to the terminal for the top nested shell; returns its marker."""
        nonce = "__au_" + secrets.token_hex(8)
        data = shell.nested[-1].line(command, nonce)
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_WRITE)
            while data:
                try:
                    data = data[os.write(shell.fd, data):]
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OSError("the terminal does not take input") from None
                    sel.select(0.05)
        return nonce.encode() + b" "

    def _settle(self, shell: _Shell, status: int) -> None:
        """After a sentinel: if it was a lower shell's line, the shells above it have exited."""
        if shell.found == shell.marker:
            shell.nested.clear()
        else:
            for index, level in enumerate(shell.nested):
                if level.waiting == shell.found:
                    del shell.nested[index + 1:]
                    level.waiting = None
                    break
        if shell.nested:
            shell.nested[-1].status = status if 0 <= status < 256 else 0

    def _enter_nested(self, box: _Box, shell: _Shell, marker: bytes, capture: _Capture, hit: tuple[int, str],
                      deadline: float) -> bool | int | None:
        """Make the shell in ``hit`` the top one and set it up: True when it answered, the
        status when the command's own line reported meanwhile, None when it took no commands."""
        capture.drop_partial_line()  # its first prompt
        if shell.nested:
            shell.nested[-1].waiting = marker
        shell.nested.append(_Level(*hit))
        try:
            setup = self._send_tty(shell, SHELL_SETUP, deadline)
        except OSError:
            setup = b"\0"
        status = self._read_sentinel(shell, [setup, *self._waiting(shell)], _Capture(0),
                                     max(time.monotonic() + 1.0, min(time.monotonic() + 5.0, deadline)))
        if status is not None and shell.found == setup:
            return True
        shell.nested.pop()
        if shell.nested:
            shell.nested[-1].waiting = None
        if status is not None and shell.found == marker:
            return status
        flush_terminal_input(shell.slave)
        return None

    def _stop_nested(self, box: _Box, shell: _Shell, capture: _Capture, marker: bytes) -> bool:
        """After a timeout in a nested shell: stop what hangs and get a shell that answers.

        The foreground job is killed (the nested shell then reports); a shell busy itself gets
        Ctrl-C (SIGINT) and an empty command; one that still does not answer is killed, and the
        shell below it (whose line started it) reports. False: the driver's shell must be dealt
        with as for any timeout."""
        levels = {self._agent_init(box), *(level.pid for level in shell.nested)}
        with contextlib.suppress(OSError):
            group = os.tcgetpgrp(shell.fd)
            if group not in levels and group > 1:
                os.killpg(group, signal.SIGKILL)
                status = self._read_sentinel(shell, [marker, *self._waiting(shell)], capture, time.monotonic() + 0.5)
                if status is not None:
                    self._settle(shell, status)
                    return True
        while shell.nested:
            top = shell.nested[-1]
            for _ in range(3):
                with contextlib.suppress(OSError):
                    group = os.tcgetpgrp(shell.fd)
                    if group not in levels and group > 1:
                        os.killpg(group, signal.SIGINT)
                with contextlib.suppress(OSError):
                    os.kill(top.pid, signal.SIGINT)
                time.sleep(0.05)
                try:
                    resync = self._send_tty(shell, ":", time.monotonic() + 1.0)
                except OSError:
                    break
                if self._read_sentinel(shell, [resync, *self._waiting(shell)], _Capture(0),
                                       time.monotonic() + 1.0) is not None:
                    self._settle(shell, 0)
                    return True
            capture.add(NESTED_KILLED_NOTE.encode())
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(top.pid, signal.SIGKILL)
            shell.nested.pop()
            flush_terminal_input(shell.slave)  # the resync lines it never read
            below = shell.nested[-1].waiting if shell.nested else shell.marker
            if below is None:
                return False
            status = self._read_sentinel(shell, [below], _Capture(0), time.monotonic() + 1.0)
            if status is not None:
                self._settle(shell, status)
                return True
        return False

    def _shell_died(self, box: _Box, capture: _Capture, started: float, *, timed_out: bool) -> ExecResult:
        shell = box.shell
        assert shell is not None
        try:
            code: int | None = shell.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and self._box_alive(box):
            # The agent ended its shell (``exit 3``, ``exec true``): report its status and give it
            # a new one, as the docker sandbox does (the interactive bash already printed "exit").
            self._stop_shell(box)
            box.shell = self._start_shell(box)
            capture.add(EXITED_NOTE.encode())
            return capture.result(None if timed_out else code, timed_out, started)
        self._stop_shell(box)
        raise self._died_error()

    @staticmethod
    def _died_error() -> BackendError:
        return BackendError("the local sandbox died (its processes were killed from outside or it ran out of "
                            "resources); call reset() to get a fresh sandbox.")

    def _kill_command_groups(self, box: _Box, shell: _Shell, before: set[int]) -> None:
        """Kill every process group of the shell's session that is not the shell's own or an
        earlier job: one the shell listed before the command (its jobs file), or one whose
        leader was already running then (``before``: the agent's pids as the command was sent;
        under load the command may time out before the shell has even written its jobs file)."""
        sid = shell.proc.pid  # nsenter (or bash) leads the session
        # The interactive bash leads a process group of its own, and so may the processes
        # between it and the session leader (unshare): spare them too.
        spared = {sid, *(int(pid) for pid in _children(sid)), *shell.chain()}
        earlier: set[int] = set()
        jobs_file = self._jobs_file(box)
        jobs_host = Path(jobs_file) if self.mechanism == "none" else box.map_writable(jobs_file)
        with contextlib.suppress(OSError, ValueError):
            if jobs_host is not None:
                earlier = {int(x) for x in _read_small_file(jobs_host).split()}
        deadline = time.monotonic() + _KILL_ROUNDS_S
        while time.monotonic() < deadline:
            groups = set()
            for pid, (pgrp, session) in _scan_processes():
                if session != sid or pgrp in spared or pgrp <= 1:  # 0: an exiting process
                    continue
                ns_pgid = _ns_pgid(pid) if self.mechanism != "none" else pgrp
                if ns_pgid not in earlier and ns_pgid not in before:
                    groups.add(pgrp)
            if not groups:
                return
            for pgrp in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgrp, signal.SIGKILL)
            time.sleep(0.005)  # a fork bomb may still be forking: look again

    # ------------------------------------------------------------------ one-off commands

    def run(self, command: str, *, timeout: float = 30.0, language: Language = "bash",
            args: tuple[str, ...] = (), max_output: int = 1 << 20) -> ExecResult:
        """Run a one-off command as root in the sandbox's namespaces, outside the agent's shell.

        Raises:
            ConfigError: unknown ``language``.
            BackendError: the sandbox died (call ``reset()``).
        """
        if language == "bash":
            argv = ["/bin/bash", "--noprofile", "--norc", "-c", command, "bash", *args]
        elif language == "python":
            argv = ["python3", "-c", command, *args]
        else:
            raise ConfigError(f"language must be 'bash' or 'python', got {language!r}.")
        return self._exec(argv, timeout=timeout, max_output=max_output)

    def _exec(self, argv: Sequence[str], *, timeout: float, max_output: int,
              capture: _Capture | None = None) -> ExecResult:
        box = self._current()
        if not self._box_alive(box):
            raise self._died_error()
        started = time.monotonic()
        capture = capture if capture is not None else _Capture(max_output)
        proc = self._spawn(self._enter_argv(box, argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, in_sandbox=True)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        deadline = started + timeout
        timed_out = False
        exited_at: float | None = None
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                while True:
                    now = time.monotonic()
                    if now >= deadline:
                        timed_out = True
                        break
                    if exited_at is None and proc.poll() is not None:
                        exited_at = now
                    # A daemon started by the command may keep our pipe open: once the
                    # command itself has exited, take what is there and stop.
                    if exited_at is not None and now - exited_at > 0.05:
                        break
                    if not sel.select(min(deadline - now, 0.05)):
                        continue
                    try:
                        chunk = os.read(fd, _CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        break
                    capture.add(chunk)
        finally:
            code: int | None = None
            try:
                if not timed_out:
                    # Output closed: the command is ending, or closed its stdout and goes on.
                    try:
                        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        timed_out = True
                if timed_out:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    try:
                        proc.wait(timeout=_KILL_TIMEOUT_S)
                    except subprocess.TimeoutExpired as exc:
                        raise BackendTimeoutError(f"a command in the local sandbox (pid {proc.pid}) did not "
                                                  "exit after SIGKILL.") from exc
            finally:
                proc.stdout.close()
        if not timed_out and not self._box_alive(box):
            raise self._died_error()
        return capture.result(None if timed_out else code, timed_out, started)

    # ------------------------------------------------------------------ files

    def _resolve(self, box: _Box, path: str) -> str:
        """Resolve ``path`` as the sandbox sees it (symlinks followed inside the sandbox's view).

        Returns the sandbox path with every existing symlink component resolved; components
        that do not exist are kept as they are.
        """
        if not posixpath.isabs(path):
            path = posixpath.join(self.workdir, path)
        todo = [p for p in path.split("/") if p]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in (".", ""):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            current = "/" + "/".join([*done, part])
            host = self._host_view(box, current)
            if host is None:
                # Private mounts (/proc, /dev) or nothing at all: not resolved from out here.
                return "/" + "/".join([*done, part, *todo])
            if host.is_symlink():
                hops += 1
                if hops > 40:
                    raise OSError(40, "Too many levels of symbolic links", path)
                target = os.readlink(host)
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p] + todo
                continue
            done.append(part)
        return "/" + "/".join(done)

    def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> bytes:
        """The content of a file as the sandbox sees it.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a directory.
            BackendError: the file is larger than ``max_bytes``.
        """
        box = self._current()
        resolved, host = self._locate(box, path)
        if self.mechanism != "none":
            host = self._host_view(box, resolved)
            if host is None:
                return self._read_inside(resolved, max_bytes)
        assert host is not None
        with open(host, "rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise BackendError(f"{path} is larger than max_bytes={max_bytes}; pass a larger max_bytes to read it.")
        return data

    def _host_view(self, box: _Box, sandbox_path: str) -> Path | None:
        """The host file the sandbox sees at a normalised ``sandbox_path`` (its writable dirs and the
        read-only system dirs), or None for anything else (private mounts, or nothing)."""
        writable = box.map_writable(sandbox_path)
        if writable is not None:
            return writable
        for path, link in self._layout:
            if sandbox_path == path or (link is None and sandbox_path.startswith(path + "/")):
                return Path(sandbox_path)
        return None

    def _locate(self, box: _Box, path: str) -> tuple[str, Path | None]:
        """``path`` as the sandbox resolves it, and the host file behind it when it is in a
        writable dir (without isolation: the host path itself)."""
        if self.mechanism == "none":
            full = path if posixpath.isabs(path) else posixpath.join(self._workdir_in(box), path)
            return full, Path(full)
        resolved = self._resolve(box, path)
        return resolved, box.map_writable(resolved)

    def _read_inside(self, path: str, max_bytes: int) -> bytes:
        capture = _Capture(max_bytes + 1)
        result = self._exec(["/bin/cat", "--", path], timeout=30.0, max_output=max_bytes + 1, capture=capture)
        if result.exit_code != 0:
            message = bytes(capture.head).decode("utf-8", "replace")
            if "No such file" in message:
                raise FileNotFoundError(2, "No such file or directory", path)
            if "Is a directory" in message:
                raise IsADirectoryError(21, "Is a directory", path)
            raise BackendError(f"could not read {path} in the sandbox: {message.strip()}")
        if capture.total > max_bytes:
            raise BackendError(f"{path} is larger than max_bytes={max_bytes}; pass a larger max_bytes to read it.")
        return bytes(capture.head)

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file in one of the writable dirs (parents are created).

        Raises:
            BackendError: ``path`` is outside the writable dirs (the host root is read-only here).
        """
        box = self._current()
        resolved, host = self._locate(box, path)
        if self.mechanism != "none":
            if host is None:
                raise BackendError(
                    f"the local sandbox cannot write {path!r}" + (f" (resolves to {resolved!r})" if resolved != path
                                                                 else "")
                    + f": only {', '.join(WRITABLE_DIRS)} are writable, the rest is read-only. "
                    "Tasks that change other paths need backend 'docker' (list only 'docker' in the task's backends).")
        assert host is not None
        missing = [parent for parent in host.parents if not parent.exists()]
        host.parent.mkdir(parents=True, exist_ok=True)
        if self._owner_uid is not None:  # what we create belongs to root inside
            for parent in missing:
                os.lchown(parent, self._owner_uid, self._owner_uid)
        # Replace atomically, and never follow a symlink planted at the final name.
        tmp = host.parent / f".agentunit-gym-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if self._owner_uid is not None:
                os.chown(tmp, self._owner_uid, self._owner_uid)
            os.chmod(tmp, stat.S_IMODE(mode))
            os.replace(tmp, host)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
