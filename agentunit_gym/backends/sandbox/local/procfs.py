"""/proc scanning: processes, their groups and namespaces, as the host sees them."""

from __future__ import annotations

import os
import selectors
from collections.abc import Iterator


def _scan_processes() -> Iterator[tuple[int, tuple[int, int]]]:
    """(pid, (process group, session)) of every process on the host."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _read_proc_stat(int(entry))
            if st is not None:
                yield int(entry), st


def _read_small(path: str) -> bytes:
    """A small /proc file whole, without a buffered file object (these are read at every
    command of every sandbox). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, 4096)]
        while chunks[-1]:
            chunks.append(os.read(fd, 4096))
    finally:
        os.close(fd)
    return b"".join(chunks)


def _children(pid: int) -> list[str]:
    try:
        return _read_small(f"/proc/{pid}/task/{pid}/children").decode().split()
    except OSError:
        return []


def _proc_stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        data = _read_small(f"/proc/{pid}/stat")
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


def _wait_readable(fd: int, timeout: float) -> bool:
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(timeout))


def _mount_points(pid: int) -> frozenset[str]:
    """The mount points of ``pid``'s mount namespace, as it sees them (empty if unreadable)."""
    try:
        with open(f"/proc/{pid}/mountinfo", "rb") as f:
            return frozenset(line.split()[4].decode("utf-8", "surrogateescape") for line in f)
    except OSError:
        return frozenset()
