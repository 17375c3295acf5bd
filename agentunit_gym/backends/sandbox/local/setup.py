"""What the parts of a local sandbox share: its options and what its start decided."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentunit_gym.backends.sandbox.limits import Limits
from agentunit_gym.backends.sandbox.local.cgroup import BoxCgroup
from agentunit_gym.backends.sandbox.local.etc_template import _CopyEntry
from agentunit_gym.backends.sandbox.local.isolation import Isolation


@dataclass
class _Setup:
    """The options of a :class:`~.sandbox.LocalSandbox` (fixed by its ``__init__``) and the state
    its ``start()`` sets up, read by its parts: the boxes (:class:`~.box._Boxes`), one-off
    commands (:class:`~.oneoff._OneOffs`), files (:class:`~.files._Files`), the agent's shell
    (:class:`~.shell._AgentShell`), the reset in place (:class:`~.reset._InPlaceReset`) and new
    boxes (:class:`~.spare._Spares`)."""

    isolation_requested: Isolation
    allow_unisolated: bool
    limits: Limits
    runaway_budget: int
    network: bool
    workdir: str
    warm_spare: bool
    spawner: bool
    env: dict[str, str]
    temp_parent: str | None
    layout: list[tuple[str, str | None]]
    owner_uid: int | None
    """The host uid behind root inside, when the sandbox's files must be given to it (root callers)."""
    mechanism: Literal["bwrap", "unshare", "none"] | None = None
    """The isolation in use once started."""
    multi_user: bool | None = None  # decided on start (usermap), with the pids cgroup
    root: Path | None = None  # our temp dir: one sub-dir per box
    etc: Path | None = None  # the /etc template (shared by the process's sandboxes)
    cgroup: BoxCgroup | None = None
    pids_refused_seen: int = 0  # forks the pids limit had refused at the last command's end
    disk_bounded: bool = False  # each box's dir is a tmpfs of `disk` bytes (box_tmpfs)
    limits_off: dict[str, str] = field(default_factory=dict)
    prlimit: str | None = None
    start_state: dict[str, _CopyEntry] | None = None  # what a box's writable dirs start with
    etc_bound: list[tuple[str, Path]] | None = None  # the template's read-only binds
    worker: ThreadPoolExecutor | None = None  # builds the spare, deletes old dirs
    closed: bool = False
    faults: dict[str, BaseException] = field(default_factory=dict)  # LocalSandbox.inject_fault

    @property
    def pids_limit(self) -> int:
        return self.limits.pids

    def fault(self, where: str) -> None:
        """Raise the error :meth:`LocalSandbox.inject_fault` planted at ``where``, once."""
        error = self.faults.pop(where, None)
        if error is not None:
            raise error

    def in_background(self, fn: Callable[..., object], *args: object) -> Future[Any]:
        if self.worker is None:
            self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentunit-gym-local")
        return self.worker.submit(fn, *args)
