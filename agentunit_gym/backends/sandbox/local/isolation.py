"""Isolation: the namespace tools, their argv, and which of them works here."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.base import AGENT_CAPABILITIES
from agentunit_gym.backends.sandbox.limits import SHM_SIZE
from agentunit_gym.errors import AgentUnitError

logger = logging.getLogger("agentunit_gym")


Isolation = Literal["auto", "bwrap", "unshare", "none"]

WRITABLE_DIRS: tuple[str, ...] = ("/etc", "/tmp", "/root", "/home", "/var", "/run")
"""Sandbox paths backed by private host dirs made fresh for each box: the only writable
places, discarded on reset."""

SYSTEM_DIRS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""The host's dirs the sandbox sees, read-only (those that exist; symlinks stay symlinks)."""

ROOT_CALLER_UID = usermap.BASE
"""The host uid that root inside the sandbox maps to when the caller is root (an unused,
unprivileged uid; the other users of the sandbox, when it maps many, follow it: see
:mod:`~agentunit_gym.backends.sandbox.usermap`). A non-root caller's sandbox maps root to the
caller's own uid."""

_IMAGE_DIR = Path(__file__).resolve().parents[3] / "images" / "local"

# Run as root of the box with all its capabilities, in the agent's new pid, mount and IPC
# namespaces, before the agent's shell: hide /proc/tty/driver (root-only on the host, so
# unreadable here: `find /` would exit 1) under an empty read-only tmpfs, give the agent a
# /dev/shm of its own (the box's /dev is read-only; this one goes with the namespace, so a
# reset in place leaves nothing there), then drop to the agent's capabilities (``$@``
# starts with :func:`agent_caps_argv`) and `exec` the shell, which stays PID 1.
# (`mount -n`: libmount would otherwise leave /run/mount behind in the sandbox's /run.)
_AGENT_INIT = ('mount -n -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=555 none /proc/tty/driver 2>/dev/null; '
               f'mount -n -t tmpfs -o nosuid,nodev,mode=1777,size={SHM_SIZE} shm /dev/shm || exit 97; exec "$@"')

# The holder: report readiness, then live until our end of its stdin closes.
_HOLDER = "echo ready; read -r _ ; exit 0"


def system_layout() -> list[tuple[str, str | None]]:
    """The host's :data:`SYSTEM_DIRS` that exist: (path, symlink target or None for a dir to bind)."""
    layout: list[tuple[str, str | None]] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            layout.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            layout.append((d, None))
    return layout



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
    return (tool_path("setpriv", "/usr/bin/setpriv"), f"--bounding-set=-all,{keep}", "--inh-caps=-all",
            "--no-new-privs", "--")


def bwrap_agent_argv() -> tuple[str, ...] | None:
    """The prefix that makes the agent's namespaces in one step when the box is bubblewrap's:
    bubblewrap again, run inside the box as its root (no new user namespace), with the
    same result as :data:`_AGENT_INIT` behind ``unshare``: new pid (the shell is PID 1) and
    IPC namespaces, a new mount namespace holding the box's mounts as they are, a new
    ``/proc`` with ``/proc/tty/driver`` hidden, a fresh ``/dev/shm``, the agent's
    capabilities and no new privileges. The rest of ``/dev`` is the box's, read-only but for
    ``/dev/pts``, whose ``ptmx`` a reset in place puts back (:func:`restore_ptmx`): a ``/dev``
    of the agent's own per shell cost a few mounts per reset. Four processes fewer per shell
    than the ``unshare`` chain. None when this bubblewrap is too old for ``--chmod`` (before 0.5)."""
    tool = process.which("bwrap")
    if tool is None or not _bwrap_has_chmod(tool):
        return None
    caps = [arg for cap in AGENT_CAPABILITIES for arg in ("--cap-add", f"CAP_{cap}")]
    return (tool, "--unshare-pid", "--unshare-ipc", "--as-pid-1", "--die-with-parent", "--dev-bind", "/", "/",
            "--proc", "/proc", "--tmpfs", "/proc/tty/driver", "--remount-ro", "/proc/tty/driver",
            "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm", "--chmod", "1777", "/dev/shm",
            "--cap-drop", "ALL", *caps, "--")


_TOOLS: dict[str, str] = {}


def tool_path(name: str, default: str | None = None) -> str:
    """``name``'s full path, looked up once per process (a bare name made every exec of the
    chain try each ``PATH`` dir in turn); ``default`` (else the bare name) when not found."""
    path = _TOOLS.get(name)
    if path is None:
        found = process.which(name)
        path = found or default or name
        if found:
            _TOOLS[name] = path
    return path


_KNOWN_OPTIONS: dict[tuple[str, str], bool] = {}


def tool_knows(tool: str, option: str) -> bool:
    """Whether the program at ``tool`` lists ``option`` in its ``--help``: asked once per
    process and option (a probe is an exec), a failed probe asked again next time."""
    known = _KNOWN_OPTIONS.get((tool, option))
    if known is None:
        try:
            helped = process.run([tool, "--help"], timeout=10.0)
        except (AgentUnitError, OSError):
            return False
        known = _KNOWN_OPTIONS[(tool, option)] = option.encode() in helped.stdout + helped.stderr
    return known


def _bwrap_has_chmod(tool: str) -> bool:
    """Whether bubblewrap knows ``--chmod`` (0.5+; asked at every agent shell's start before)."""
    return tool_knows(tool, "--chmod")


def nsenter_has_wdns(tool: str) -> bool:
    """Whether ``nsenter`` knows ``--wdns`` (util-linux 2.38+: change to a directory of the
    entered mount namespace). With it a one-off command starts in the workdir without ``env
    --chdir`` in front (an exec fewer, ~1 ms of CPU in a VM, where every dynamically linked
    program's start pays for ``cpuid``), and a workdir that is gone stops the command before
    it runs, as ``env`` did."""
    return tool_knows(tool, "--wdns")


def drop_privileges_argv() -> list[str]:
    """The prefix that makes a root caller's sandbox processes run as :data:`ROOT_CALLER_UID`
    on the host (so root inside maps to an unprivileged uid); empty for a non-root caller."""
    if os.geteuid() != 0:
        return []
    uid = str(ROOT_CALLER_UID)
    return [tool_path("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


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


_RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
"""Signals a caller may have inherited ignored: ``cmd &`` without job control ignores INT and
QUIT, ``nohup`` HUP. (SIGPIPE, which Python itself ignores, subprocess puts back anyway.)"""


def _default_signals_argv() -> list[str]:
    """``env --default-signal=INT,QUIT,HUP`` when this process ignores any of them, else nothing.

    The box's processes inherit our signal dispositions, and one that starts with SIGINT
    ignored cannot take it back: the agent's Ctrl-C (a nested shell's busy loop ended by the
    timeout, ``trap`` in its scripts) would then do nothing, unlike in a container, whose
    processes start from dockerd's defaults. Checked per process (a caller may change its
    handlers); the wrapper costs one exec, paid only when something is ignored."""
    if all(signal.getsignal(number) is not signal.SIG_IGN for number in _RESET_SIGNALS):
        return []
    return [_ENV_PROGRAM, "--default-signal=INT,QUIT,HUP"]


_ENV_PROGRAM = shutil.which("env") or "/usr/bin/env"



def holder_argv(mechanism: Literal["bwrap", "unshare"], box_dir: Path, *, multi_user: bool, network: bool,
                etc_binds: Sequence[tuple[str, Path]]) -> list[str]:
    """The argv of a box's holder: it makes the box's namespaces and root (the writable dirs
    of ``box_dir/w``, the template's ``etc_binds`` read-only, the system dirs), reports
    ``ready`` and waits on its stdin (:data:`_HOLDER`)."""
    def writable(d: str) -> Path:
        return box_dir / "w" / d.lstrip("/")

    # Many users: the user namespace is made unmapped and waits in usermap.GATE until
    # _start_holder has written its uid/gid range; bwrap then runs as root in it (it makes
    # the other namespaces itself, no user namespace of its own).
    users = ["unshare", "--user", "/bin/sh", "-c", usermap.GATE, "gate"] if multi_user else []
    if mechanism == "bwrap":
        own_user = [] if multi_user else ["--unshare-user", "--uid", "0", "--gid", "0"]
        argv = [*users, "bwrap", *own_user, "--unshare-pid", *([] if network else ["--unshare-net"]),
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--hostname", "sandbox", *_bwrap_system_args(), "--proc", "/proc", "--dev", "/dev"]
        for d in WRITABLE_DIRS:
            argv += ["--bind", str(writable(d)), d]
        for rel, template in etc_binds:
            argv += ["--ro-bind", str(template), f"/etc/{rel}"]
        for path in masked_system_dirs():
            argv += ["--tmpfs", path, "--remount-ro", path]
        return argv + ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/", "/bin/sh", "-c", _HOLDER]
    specs = [f"link:{path}:{link}" if link is not None else f"bind:{path}" for path, link in system_layout()]
    specs += [f"etc:{template}:/etc/{rel}" for rel, template in etc_binds]
    specs += [f"mask:{path}" for path in masked_system_dirs()]
    gate = ["/bin/sh", "-c", usermap.GATE, "gate"] if multi_user else []
    return ["unshare", "--user", *([] if multi_user else ["--map-root-user"]), "--pid",
            *([] if network else ["--net"]), "--mount", "--ipc", "--uts",
            "--fork", "--kill-child", "--propagation", "private", *gate, "/bin/bash", "-c", _setup_script(),
            "setup", str(box_dir / "root"), str(box_dir / "w"), _HOLDER, *specs]


PTMX_MODE = 0o666
"""The mode of ``/dev/pts/ptmx`` in a box's devpts (bubblewrap's ``ptmxmode=0666``)."""


def restore_ptmx(ns_pid: int | None, uid: int, gid: int) -> None:
    """Put back the owner and mode of the box's ``/dev/pts/ptmx`` (the box's root, 0666), seen
    through the box's pid 1: the one thing of its ``/dev`` that root inside could change (its
    devpts is shared by the box's shells; the rest of ``/dev`` is read-only). ``chmod 600``
    there would leave the next episode's programs unable to open a terminal. Nothing to do
    where the box has no devpts (``unshare``) or is gone.

    Raises:
        OSError: it is there but could not be put back (the reset then replaces the box).
    """
    if ns_pid is None:
        return
    path = f"/proc/{ns_pid}/root/dev/pts/ptmx"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISCHR(st.st_mode):  # devpts holds device nodes only; anything else: a new box
        raise OSError(f"{path} is not a character device")
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.lchown(path, uid, gid)
    if stat.S_IMODE(st.st_mode) != PTMX_MODE:
        os.chmod(path, PTMX_MODE)
