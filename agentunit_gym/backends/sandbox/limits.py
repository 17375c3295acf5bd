"""Resource limits of one sandbox, the same on both backends: memory, CPU, processes, writable space.

Both sandboxes take ``memory=``, ``cpus=``, ``pids_limit=`` and ``disk=`` and turn them into
:class:`Limits` with :func:`resolve_limits`; the docker sandbox gives them to the container,
the local sandbox to a cgroup of its own (:mod:`~agentunit_gym.backends.sandbox.local.cgroup`) and
a size-bounded tmpfs for the box's writable dirs (:mod:`~agentunit_gym.backends.sandbox.local.box_tmpfs`).

Why these defaults (docs/sandbox-local.md, "Limits"):

* ``memory`` 1 GiB: what the agent's processes may use. AgentBench's OS tasks need a few
  MiB (shell tools, a short python script); 1 GiB leaves room for ``pip``-sized programs
  and keeps 16 boxes at once under 32 GiB even when every one misbehaves.
* ``disk`` 1 GiB: what an episode may write (files in /root, /tmp, ...). It lives in
  memory (a tmpfs on both backends), so the box's memory cgroup is ``memory + disk``
  (:attr:`Limits.cgroup_memory`): a full disk is ENOSPC in the agent's shell and leaves
  its processes their ``memory``, and never turns into an out-of-memory kill.
* ``cpus`` 1 core: one task's shell never needs more, and 16 boxes cannot starve the host.
* ``pids`` 512: a build with ``make -j`` fits; a fork bomb stops there.

Example::

    >>> limits = resolve_limits(memory="256m", disk="64m")
    >>> limits.memory, limits.disk, limits.cpus, limits.pids
    (268435456, 67108864, 1.0, 512)
    >>> format_size(limits.cgroup_memory)
    '320 MiB'
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from agentunit_gym.backends.sandbox.base import ExecResult
from agentunit_gym.errors import ConfigError

DEFAULT_MEMORY = 1 << 30
"""Bytes the agent's processes may use (1 GiB)."""
DEFAULT_DISK = 1 << 30
"""Bytes an episode may write to the sandbox's writable dirs (1 GiB)."""
DEFAULT_CPUS = 1.0
"""CPU time per wall-clock second, in cores."""
DEFAULT_PIDS = 512
"""Most processes (and threads) at once."""

MIN_MEMORY = 32 << 20
"""Below this, bash, python3 and the shell protocol do not fit."""
MIN_DISK = 8 << 20
"""The box's own /etc copy and skeleton take ~1 MiB; a few MiB more for the task's files."""
MIN_PIDS = 16
"""The shell and its tools need some."""

SHM_SIZE = 64 << 20
"""Size of the agent's /dev/shm on both backends (as Docker's default ``--shm-size``); part of ``memory``."""

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: str | int | float, name: str) -> int:
    """Bytes of a size given as a number of bytes or Docker's way (``"512m"``, ``"1g"``,
    ``"1.5GiB"``; powers of 1024).

    Raises:
        ConfigError: not a size, or not positive.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a size such as '512m' or '1g', got {value!r}.")
    if isinstance(value, (int, float)):
        size = value
    else:
        match = _SIZE.match(str(value))
        if match is None:
            raise ConfigError(f"{name} must be a size such as '512m', '1g' or a number of bytes, got {value!r}.")
        size = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not math.isfinite(size) or size <= 0:
        raise ConfigError(f"{name} must be a positive size such as '512m' or '1g', got {value!r}.")
    return int(size)


def parse_cpus(value: str | int | float) -> float:
    """Cores as a float (``1``, ``"0.5"``).

    Raises:
        ConfigError: not a positive number.
    """
    try:
        cpus = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        cpus = math.nan
    if not math.isfinite(cpus) or cpus < 0.01:
        raise ConfigError(f"cpus must be a number of cores of at least 0.01 (e.g. 1 or 0.5), got {value!r}.")
    return cpus


def parse_pids(value: str | int) -> int:
    """A process count.

    Raises:
        ConfigError: not a whole number, or below :data:`MIN_PIDS`.
    """
    try:
        pids = int(value) if not isinstance(value, (bool, float)) else -1
    except (TypeError, ValueError):
        pids = -1
    if pids < MIN_PIDS:
        raise ConfigError(f"pids_limit must be a whole number of at least {MIN_PIDS} (the shell and its tools "
                          f"need some), got {value!r}.")
    return pids


def format_size(size: int) -> str:
    """``"256 MiB"``, ``"1 GiB"``, ``"1.5 GiB"``: how notes and docs show a size."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use; :func:`resolve_limits` makes one from the options."""

    memory: int
    """Bytes the agent's processes may use."""
    cpus: float
    """Cores (CPU time per wall-clock second)."""
    pids: int
    """Most processes and threads at once."""
    disk: int
    """Bytes the writable dirs may hold (a tmpfs: memory too)."""

    @property
    def cgroup_memory(self) -> int:
        """The memory limit of the box's cgroup or container: ``memory + disk``, since files on
        tmpfs are charged there. A full disk then leaves the processes their ``memory``."""
        return self.memory + self.disk

    def describe(self) -> str:
        """One line for logs and ``info``: ``memory 256 MiB, disk 64 MiB, cpus 1, pids 512``."""
        return (f"memory {format_size(self.memory)}, disk {format_size(self.disk)}, "
                f"cpus {self.cpus:g}, pids {self.pids}")


def resolve_limits(*, memory: str | int | float | None = None, cpus: str | int | float | None = None,
                   pids: str | int | None = None, disk: str | int | float | None = None) -> Limits:
    """:class:`Limits` from a sandbox's options; ``None`` takes the default.

    Raises:
        ConfigError: a value does not parse, or is below its minimum.
    """
    limits = Limits(
        memory=DEFAULT_MEMORY if memory is None else parse_size(memory, "memory"),
        cpus=DEFAULT_CPUS if cpus is None else parse_cpus(cpus),
        pids=DEFAULT_PIDS if pids is None else parse_pids(pids),
        disk=DEFAULT_DISK if disk is None else parse_size(disk, "disk"),
    )
    if limits.memory < MIN_MEMORY:
        raise ConfigError(f"memory must be at least {format_size(MIN_MEMORY)} (bash and python3 must fit), "
                          f"got {memory!r}.")
    if limits.disk < MIN_DISK:
        raise ConfigError(f"disk must be at least {format_size(MIN_DISK)} (the box's own files need some), "
                          f"got {disk!r}.")
    return limits


def memory_note(limits: Limits) -> str:
    """The line the agent sees after a command the kernel killed at the memory limit."""
    return f"[killed: the command went over the sandbox's memory limit ({format_size(limits.memory)})]\n"


def add_memory_note(result: ExecResult, limits: Limits) -> ExecResult:
    """``result`` with :func:`memory_note` after its output, for a command the kernel killed
    at the memory limit (exit 137 and the cgroup's ``oom_kill`` count went up meanwhile)."""
    if result.exit_code != 137:
        return result
    joint = "" if result.output.endswith("\n") or not result.output else "\n"
    return dataclasses.replace(result, output=result.output + joint + memory_note(limits))
