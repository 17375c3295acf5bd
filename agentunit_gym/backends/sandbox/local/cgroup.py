"""The pids cgroup of one sandbox."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("agentunit_gym")


class _PidsCgroup:
    """A pids cgroup for one sandbox, when the controller is writable by us."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        path.mkdir()
        (path / "pids.max").write_text(str(limit))
        self.procs_file = str(path / "cgroup.procs")

    @classmethod
    def create(cls, limit: int) -> _PidsCgroup | None:
        name = f"agentunit_gym-{os.getpid()}-{secrets.token_hex(4)}"
        for base in cls._candidate_parents():
            try:
                return cls(base / name, limit)
            except OSError:
                with contextlib.suppress(OSError):
                    (base / name).rmdir()
        return None

    @staticmethod
    def _candidate_parents() -> Iterator[Path]:
        v1 = Path("/sys/fs/cgroup/pids")
        if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
            yield v1
        # cgroup v2: a child of our own cgroup, if it delegates the pids controller.
        try:
            own = next(line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.startswith("0::"))
        except (OSError, StopIteration):
            return
        for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
            parent = mount / own.lstrip("/")
            try:
                if "pids" in (parent / "cgroup.subtree_control").read_text().split() and os.access(parent, os.W_OK):
                    yield parent
            except OSError:
                continue

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in Path(self.procs_file).read_text().split()]
        except OSError:
            return []

    def remove(self, deadline: float) -> None:
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    logger.warning("could not remove cgroup %s (processes still exiting)", self.path)
                    return
                time.sleep(0.01)

