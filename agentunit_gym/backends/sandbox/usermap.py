"""Many users in the local sandbox: the uid/gid range a root caller's sandbox maps.

The local sandbox's user namespace maps root inside to one unprivileged host uid. When the
caller is root, and the range checks below pass, it maps a whole range instead: uids and
gids ``0..65535`` inside are host ``BASE..BASE+65535`` (``BASE`` is
:data:`~agentunit_gym.backends.sandbox.local.ROOT_CALLER_UID`, 2000000000), so ``su``,
``runuser``, ``chown jack`` and ``useradd`` then acting as that user work as in a container,
and every process of the sandbox still runs as a host uid of that range, which owns nothing
on the host.

How: the holder creates its user namespace unmapped and waits (:data:`GATE`) for a line on
its stdin before it execs anything; we, as root on the host (``CAP_SETUID``/``CAP_SETGID`` in
the parent namespace), write ``/proc/PID/gid_map`` and ``uid_map`` (:func:`write_maps`), then
send the line. The gate checks it is root inside before it goes on, so a namespace whose
map was not written never gets a capability (fail closed: the setup's first ``mount`` would
fail anyway). No ``newuidmap``, no ``/etc/subuid`` entry: only root can do this, so a
non-root caller keeps the one-uid map.

The range is refused (and the sandbox maps one uid, as for a non-root caller) when any of
it is in use on the host (:func:`range_conflicts`): an ``/etc/subuid`` or ``/etc/subgid``
range overlapping it, a user or group of the host's ``/etc/passwd`` / ``/etc/group`` in
it, or a host process (one in our own user namespace) running as a uid in it; or when our
own user namespace does not map the range (a container with a remapped root); or when a
probe (a namespace mapped this way running ``true``, once per process) fails.

Example::

    >>> support = user_switching("auto")
    >>> support.ok, support.reason   # as root on a normal host
    (True, 'uids 0-65535 map to host 2000000000-2000065535')
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BASE = 2_000_000_000
"""Host uid/gid of root inside (the same as ``ROOT_CALLER_UID``)."""

COUNT = 65_536
"""How many uids and gids are mapped: inside ``0..COUNT-1``, as in a container's default range."""

GATE = 'echo map; read -r _ || exit 1; [ "$(id -u):$(id -g)" = 0:0 ] || exit 1; exec "$@"'
"""Runs first in the new, unmapped user namespace: says ``map``, waits for the go line, and
continues (``exec "$@"``) only if it is now root there."""

_PROBE_TIMEOUT_S = 10.0
_SUBID_FILES = ("/etc/subuid", "/etc/subgid")
_ID_FILES = ("/etc/passwd", "/etc/group")


@dataclass(frozen=True)
class Support:
    """Whether sandboxes of this process can switch users, and why (or why not)."""

    ok: bool
    reason: str


def range_conflicts(base: int = BASE, count: int = COUNT, *, root: str = "/") -> list[str]:
    """What on the host already uses ids of ``base..base+count-1`` (empty when nothing).

    Reads ``/etc/subuid``, ``/etc/subgid``, ``/etc/passwd``, ``/etc/group`` and the uids of
    the processes in our own user namespace (``root`` prefixes the paths, for tests).
    ``base`` itself is skipped among the processes: our own sandboxes' launchers run as it
    for an instant before they enter their namespace.
    """
    top = base + count  # exclusive
    found: list[str] = []
    for name in _SUBID_FILES:
        for line in _lines(Path(root, name.lstrip("/"))):
            parts = line.split(":")
            if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
                start, size = int(parts[1]), int(parts[2])
                if start < top and base < start + size:
                    found.append(f"{name}: {line}")
    for name in _ID_FILES:
        for line in _lines(Path(root, name.lstrip("/"))):
            parts = line.split(":")
            if len(parts) >= 3 and parts[2].isdigit() and base <= int(parts[2]) < top:
                found.append(f"{name}: {parts[0]} ({parts[2]})")
    found += [f"host process {pid} runs as uid {uid}" for pid, uid in _host_processes_in(base + 1, top, root)]
    return found


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _host_processes_in(low: int, top: int, root: str) -> list[tuple[int, int]]:
    """(pid, uid) of processes in our user namespace with a real, effective or saved uid in ``low..top-1``."""
    proc = Path(root, "proc")
    try:
        own_ns = os.stat("/proc/self/ns/user").st_ino if root == "/" else None
    except OSError:
        own_ns = None
    out: list[tuple[int, int]] = []
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return out
    for entry in entries:
        try:
            status = (proc / entry / "status").read_text()
            if own_ns is not None and os.stat(proc / entry / "ns" / "user").st_ino != own_ns:
                continue  # another user namespace (another sandbox's users): not the host's
        except OSError:
            continue  # gone, or not ours to look at
        for line in status.splitlines():
            if line.startswith("Uid:"):
                uids = [int(x) for x in line.split()[1:4] if x.isdigit()]
                hit = next((u for u in uids if low <= u < top), None)
                if hit is not None:
                    out.append((int(entry), hit))
                break
    return out


def _own_map_covers(base: int, count: int) -> bool:
    """Our own user namespace maps host ids ``base..base+count-1`` (always true outside containers)."""
    for name in ("uid_map", "gid_map"):
        try:
            rows = [[int(x) for x in line.split()] for line in Path("/proc/self", name).read_text().splitlines()]
        except (OSError, ValueError):
            return False
        if not any(len(r) == 3 and r[0] <= base and base + count <= r[0] + r[2] for r in rows):
            return False
    return True


_LOCK = threading.Lock()


def user_switching(isolation: str = "auto") -> Support:
    """Whether a local sandbox with this ``isolation`` made by this process maps many users.

    Callable before any sandbox starts (the answer is computed once per process; the local
    sandbox also needs a pids cgroup for it, see ``LocalSandbox.multi_user``).
    """
    if isolation == "none":
        return Support(False, "no isolation: commands run on the host as the caller")
    if os.geteuid() != 0:
        return Support(False, "the caller is not root: mapping more than its own uid would need newuidmap and "
                              "/etc/subuid ranges, host configuration the library does not edit")
    with _LOCK:
        return _root_support()


@functools.lru_cache(maxsize=1)
def _root_support() -> Support:
    last = BASE + COUNT - 1
    if not _own_map_covers(BASE, COUNT):
        return Support(False, f"this process's user namespace does not map host ids {BASE}-{last}")
    conflicts = range_conflicts()
    if conflicts:
        shown = "; ".join(conflicts[:3]) + (f" (and {len(conflicts) - 3} more)" if len(conflicts) > 3 else "")
        return Support(False, f"host ids {BASE}-{last} are in use: {shown}")
    failure = _probe()
    if failure is not None:
        return Support(False, f"mapping host ids {BASE}-{last} failed here: {failure}")
    return Support(True, f"uids 0-{COUNT - 1} map to host {BASE}-{last}")


def _probe() -> str | None:
    """Map a new user namespace as a sandbox's is mapped, and run ``true`` in it; None when that
    worked, else what went wrong. Every wait has a deadline; the probe is killed on failure."""
    argv = ["setpriv", f"--reuid={BASE}", f"--regid={BASE}", "--clear-groups", "--",
            "unshare", "--user", "/bin/sh", "-c", GATE, "gate", "true"]
    deadline = time.monotonic() + _PROBE_TIMEOUT_S
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                close_fds=True, start_new_session=True)
    except OSError as exc:
        return f"could not start the probe: {exc}"
    assert proc.stdin is not None and proc.stdout is not None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(max(0.0, deadline - time.monotonic())):
                return "the probe did not answer"
        if proc.stdout.readline() != b"map\n":
            return "the probe did not reach its user namespace"
        write_maps(proc.pid)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        return None if code == 0 else f"the mapped probe exited {code}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_PROBE_TIMEOUT_S)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


def map_lines(base: int = BASE, count: int = COUNT) -> str:
    """The ``uid_map``/``gid_map`` text: one range, root inside at ``base``."""
    return f"0 {base} {count}\n"


def write_maps(pid: int, base: int = BASE, count: int = COUNT) -> None:
    """Map ``pid``'s (unmapped) user namespace: gids first, then uids.

    Raises:
        OSError: the kernel refused a map (not root, a map already written, a range our own
            namespace does not hold). The caller must then kill the namespace's processes.
    """
    text = map_lines(base, count).encode()
    for name in ("gid_map", "uid_map"):
        fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY)
        try:
            if os.write(fd, text) != len(text):
                raise OSError(f"short write to /proc/{pid}/{name}")
        finally:
            os.close(fd)


def give_homes(etc: Path, home: Path, base: int = BASE) -> None:
    """Give each existing dir under ``home`` (a box's ``/home``, on the host) to the user of
    ``etc/passwd`` whose home it is, as the host sees that user (``base`` + uid): what
    ``useradd --create-home`` left in an image (the template's ``agent`` owns ``/home/agent``)."""
    for line in _lines(etc / "passwd"):
        parts = line.split(":")
        if len(parts) < 6 or not (parts[2].isdigit() and parts[3].isdigit()) or not parts[5].startswith("/home/"):
            continue
        uid, gid = int(parts[2]), int(parts[3])
        path = home / parts[5][len("/home/"):]
        if 0 < uid < COUNT and 0 <= gid < COUNT and "/" not in parts[5][len("/home/"):] \
                and path.is_dir() and not path.is_symlink():
            os.lchown(path, base + uid, base + gid)


def uids_of(pid: int) -> tuple[int, ...] | None:
    """Real, effective, saved and filesystem uids of ``pid`` as the host sees them; None when it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return tuple(int(x) for x in line.split()[1:])
    return None


def in_range(uid: int, base: int = BASE, count: int = COUNT) -> bool:
    return base <= uid < base + count


__all__ = ["BASE", "COUNT", "GATE", "Support", "in_range", "map_lines", "range_conflicts", "uids_of",
           "user_switching", "write_maps"]
