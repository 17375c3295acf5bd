"""A cgroup per local sandbox: memory (no swap), CPU and process limits.

:meth:`BoxCgroup.create` makes one child cgroup of our own in each controller's hierarchy
and writes the limits there:

* cgroup v2 (``memory.max``, ``memory.swap.max`` = 0, ``cpu.max``, ``pids.max``) where our
  cgroup delegates the controller to its children (root on a host whose own cgroup is the
  root of the hierarchy, or a cgroup delegated to us: ``systemd-run -p Delegate=yes``);
* cgroup v1 otherwise (``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes``,
  ``cpu.cfs_quota_us``, ``pids.max``) where the controller's hierarchy is writable (root on
  a v1 or hybrid host).

A controller neither offers is left out and named in :attr:`BoxCgroup.missing`, with the
reason; the sandbox warns once and its ``info`` says which limits are off. Every process
of the sandbox joins before it runs anything (:meth:`BoxCgroup.join_argv`), so what the
agent's commands allocate, and the files they write to the box's tmpfs, are charged there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentunit_gym.backends.sandbox.limits import Limits
from agentunit_gym.images.os.shell_protocol import read_counter

logger = logging.getLogger("agentunit_gym")

CONTROLLERS: tuple[str, ...] = ("memory", "cpu", "pids")
"""What a box's cgroup limits (``memory`` also bounds its tmpfs files)."""

CPU_PERIOD_US = 100_000
"""The CFS period the CPU quota is a share of (the kernel's default)."""

_PREFIX = "agentunit_gym-"

ENABLE_HINT = ("run as root on a cgroup v2 host (or a v1/hybrid host), or inside a cgroup delegated to you, "
               "e.g. `systemd-run --user --scope -p Delegate=yes agentunit-gym ...`; or use backend='docker'")
"""How to get the limits when a controller is missing (the warning says it)."""


@dataclass(frozen=True)
class _Hierarchy:
    """Where one controller's child cgroups go: a parent dir and the cgroup version there."""

    parent: Path
    version: int


def _own_paths() -> tuple[str | None, dict[str, str]]:
    """Our cgroup: the v2 path (``0::/...``) and each v1 controller's path, from /proc/self/cgroup."""
    v2: str | None = None
    v1: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, {}
    for line in lines:
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if number == "0" and not names:
            v2 = path
        for name in names.split(","):
            if name:
                v1[name] = path
    return v2, v1


def _mounts() -> tuple[list[Path], dict[str, Path]]:
    """cgroup2 mount points, and each v1 controller's mount point, from /proc/self/mountinfo."""
    v2: list[Path] = []
    v1: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return [], {}
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            v2.append(point)
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                v1.setdefault(option, point)
    return v2, v1


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def find_hierarchies(controllers: Iterable[str] = CONTROLLERS, *,
                     enable: bool = True) -> tuple[dict[str, _Hierarchy], dict[str, str]]:
    """For each controller, the writable parent its box cgroups go under, or why there is none.

    With ``enable``, a v2 controller our cgroup offers but does not pass on to children yet is
    enabled for them (``cgroup.subtree_control``) when the kernel lets us.

    Returns:
        (found by controller, reason by missing controller).
    """
    own_v2, own_v1 = _own_paths()
    v2_mounts, v1_mounts = _mounts()
    found: dict[str, _Hierarchy] = {}
    missing: dict[str, str] = {}
    v2_parent: Path | None = None
    if own_v2 is not None:
        for mount in v2_mounts:
            candidate = mount / own_v2.lstrip("/")
            if (candidate / "cgroup.controllers").exists():
                v2_parent = candidate
                break
    for name in controllers:
        if v2_parent is not None and name in _words(v2_parent / "cgroup.controllers"):
            delegated = name in _words(v2_parent / "cgroup.subtree_control")
            if not delegated and enable and os.access(v2_parent / "cgroup.subtree_control", os.W_OK):
                # Only possible where our cgroup holds no processes of its own (or is the root).
                with contextlib.suppress(OSError):
                    (v2_parent / "cgroup.subtree_control").write_text(f"+{name}")
                    delegated = name in _words(v2_parent / "cgroup.subtree_control")
            if delegated and os.access(v2_parent, os.W_OK):
                found[name] = _Hierarchy(v2_parent, 2)
                continue
            missing[name] = f"our cgroup v2 ({v2_parent}) does not delegate the {name} controller to us"
            continue
        v1_mount = v1_mounts.get(name)
        if v1_mount is not None:
            parent = v1_mount / own_v1.get(name, "/").lstrip("/")
            if not parent.is_dir():  # our path is not visible in this mount namespace
                parent = v1_mount
            if os.access(parent, os.W_OK):
                found[name] = _Hierarchy(parent, 1)
                missing.pop(name, None)
                continue
            missing[name] = f"the cgroup v1 {name} hierarchy ({parent}) is not writable by us"
            continue
        missing.setdefault(name, f"no cgroup hierarchy offers the {name} controller here")
    return found, missing


def controller_available(name: str) -> bool:
    """Whether a box cgroup would get ``name`` (without creating one)."""
    found, _ = find_hierarchies((name,), enable=False)
    return name in found


def _remove_stale(parent: Path) -> None:
    """Remove empty box cgroups that processes which are gone left behind (a crash, a SIGKILL)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if not entry.name.startswith(_PREFIX):
                continue
            owner = entry.name[len(_PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


@dataclass
class BoxCgroup:
    """One sandbox's cgroup: a dir per hierarchy, its limits written."""

    dirs: dict[str, Path]
    """The box's cgroup dir, by controller (two controllers may share one dir)."""
    versions: dict[str, int]
    """The cgroup version of each controller's dir."""
    missing: dict[str, str] = field(default_factory=dict)
    """Controllers not limited here, with the reason."""

    @classmethod
    def create(cls, limits: Limits) -> BoxCgroup:
        """A new cgroup with ``limits`` in every hierarchy we may write (maybe none: see :attr:`missing`)."""
        found, missing = find_hierarchies()
        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        dirs: dict[str, Path] = {}
        versions: dict[str, int] = {}
        made: dict[Path, Path] = {}
        for controller, hierarchy in found.items():
            path = made.get(hierarchy.parent)
            try:
                if path is None:
                    _remove_stale(hierarchy.parent)
                    path = hierarchy.parent / name
                    path.mkdir()
                    made[hierarchy.parent] = path
                _write_limit(path, controller, hierarchy.version, limits)
            except OSError as exc:
                missing[controller] = f"could not set the {controller} limit in {path}: {exc.strerror or exc}"
                continue
            dirs[controller] = path
            versions[controller] = hierarchy.version
        box = cls(dirs, versions, missing)
        for path in made.values():  # a dir whose every controller failed is of no use
            if path not in dirs.values():
                with contextlib.suppress(OSError):
                    path.rmdir()
        return box

    @property
    def controllers(self) -> frozenset[str]:
        """The controllers limited here."""
        return frozenset(self.dirs)

    @property
    def procs_files(self) -> tuple[str, ...]:
        """``cgroup.procs`` of each distinct dir: a process joins by writing its pid to each."""
        return tuple(dict.fromkeys(str(path / "cgroup.procs") for path in self.dirs.values()))

    def join_argv(self, argv: Sequence[str], *, tty: str | None = None, oom_score_adj: int | None = None) -> list[str]:
        """``argv`` behind a tiny ``sh`` wrapper that joins this cgroup, then execs it.

        With ``tty``, the wrapper (a session leader) opens that terminal, which makes it the
        session's controlling terminal. With ``oom_score_adj``, it sets that first (for the
        agent's processes: ``AGENT_OOM_SCORE_ADJ``).
        """
        adj = f"echo {int(oom_score_adj)} > /proc/self/oom_score_adj 2>/dev/null; " if oom_score_adj is not None else ""
        join = adj + 'for f in $0; do echo $$ > "$f" || exit 125; done; '
        join += 'exec "$@"' if tty is None else ': <>"$1" && shift && exec "$@"'
        return ["/bin/sh", "-c", join, " ".join(self.procs_files), *([] if tty is None else [tty]), *argv]

    def oom_kills(self) -> int:
        """How many processes the kernel has killed at this cgroup's memory limit so far (-1: unknown)."""
        path = self.dirs.get("memory")
        name = "memory.events" if self.versions.get("memory") == 2 else "memory.oom_control"
        return read_counter([path / name], "oom_kill") if path is not None else -1

    def pids_refused(self) -> int:
        """How many forks this cgroup's pids limit has refused so far (-1: unknown)."""
        path = self.dirs.get("pids")
        return read_counter([path / "pids.events"], "max") if path is not None else -1

    def cpu_throttled(self) -> int:
        """In how many CPU periods this cgroup's ``cpus=`` limit has held it still so far (-1: unknown)."""
        path = self.dirs.get("cpu")
        return read_counter([path / "cpu.stat"], "nr_throttled") if path is not None else -1

    def pids(self) -> list[int]:
        """Every process in the cgroup (any of its dirs)."""
        found: set[int] = set()
        for procs in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(x) for x in Path(procs).read_text().split())
        return sorted(found)

    def remove(self, deadline: float) -> bool:
        """Kill what is left in the cgroup and remove its dirs (polls until ``deadline``).

        Returns:
            False when a dir could not be removed by then (processes still exiting).
        """
        left = set(self.dirs.values())
        while left:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            for path in list(left):
                try:
                    path.rmdir()
                    left.discard(path)
                except FileNotFoundError:
                    left.discard(path)
                except OSError:
                    pass
            if left:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
        self.dirs.clear()
        return True


def _write_limit(path: Path, controller: str, version: int, limits: Limits) -> None:
    quota = max(1000, int(limits.cpus * CPU_PERIOD_US))
    if controller == "memory":
        if version == 2:
            (path / "memory.max").write_text(str(limits.cgroup_memory))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to limit
                (path / "memory.swap.max").write_text("0")
        else:
            (path / "memory.limit_in_bytes").write_text(str(limits.cgroup_memory))
            with contextlib.suppress(FileNotFoundError):  # memory + swap = memory: no swap
                (path / "memory.memsw.limit_in_bytes").write_text(str(limits.cgroup_memory))
    elif controller == "cpu":
        if version == 2:
            (path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
    elif controller == "pids":
        (path / "pids.max").write_text(str(limits.pids))


def limits_off(box: BoxCgroup, disk_bounded: bool, mechanism: str | None, *,
               rlimit_nproc: bool = False) -> dict[str, str]:
    """Which of the local sandbox's limits do not apply here, each with the reason.

    ``rlimit_nproc``: the process limit applies as ``RLIMIT_NPROC`` instead (no pids cgroup)."""
    off = dict(box.missing)
    if rlimit_nproc:
        off.pop("pids", None)  # RLIMIT_NPROC in the sandbox's user namespace bounds it
    if mechanism == "none":
        off["disk"] = "the sandbox runs unisolated (isolation='none'): it writes where the host lets it"
    elif not disk_bounded:
        off["disk"] = ("mounting a size-bounded tmpfs for the box's files needs root"
                       + ("; its files count against the memory limit" if "memory" in box.controllers else ""))
    return off


_WARNED: set[str] = set()


def warn_limits_off(off: dict[str, str]) -> None:
    """Warn once per process (per distinct set of reasons) that limits are off, why, and the fix."""
    if not off:
        return
    text = "; ".join(f"{name}: {reason}" for name, reason in sorted(off.items()))
    if text in _WARNED:
        return
    _WARNED.add(text)
    logger.warning("local sandbox: no %s limit (%s). To get them, %s.", ", ".join(sorted(off)), text, ENABLE_HINT)
