"""The local sandbox class: its options, start, reset (in place or with a new box) and close;
the chain of classes it is built on is described in :class:`~.box._BoxProcesses`."""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.base import ExecResult
from agentunit_gym.backends.sandbox.limits import Limits, resolve_limits
from agentunit_gym.backends.sandbox.local import box_tmpfs, cgroup
from agentunit_gym.backends.sandbox.local.box import (
    _DEFAULT_ENV,
    _KILL_TIMEOUT_S,
    _Box,
)
from agentunit_gym.backends.sandbox.local.etc_template import (
    _CopyEntry,
    default_temp_parent,
    release_etc_template,
    shared_etc_template,
)
from agentunit_gym.backends.sandbox.local.hostfs import (
    _check_traversable,
    _rmtree,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    ROOT_CALLER_UID,
    WRITABLE_DIRS,
    Isolation,
    detect_isolation,
    drop_privileges_argv,
    system_layout,
)
from agentunit_gym.backends.sandbox.local.procfs import _children_ints
from agentunit_gym.backends.sandbox.local.spare import _WarmSpare
from agentunit_gym.errors import BackendError, BackendTimeoutError, ConfigError, IsolationError
from agentunit_gym.images.os.shell_protocol import DEFAULT_RUNAWAY_BUDGET

logger = logging.getLogger("agentunit_gym")


ResetFault = Literal["reset.dirs", "reset.shell"]
"""Where :meth:`LocalSandbox.inject_fault` can make a reset in place fail: putting the writable
dirs back, or taking the next episode's shell."""


@dataclass(frozen=True)
class BoxInfo:
    """Facts about a :class:`LocalSandbox`'s current box, from :meth:`LocalSandbox.box_info`: a
    snapshot for tests and debugging (nothing in it controls the sandbox)."""

    box_dir: Path
    """The box's private dir on the host: a reset in place keeps it, a reset that replaces the
    box gives a new one (so it tells the two apart)."""
    writable_dirs: dict[str, Path]
    """Each writable sandbox dir (``/tmp``...) and the host dir behind it."""
    holder_pid: int | None
    """Host pid of the holder process (None unisolated)."""
    namespace_pid: int | None
    """Host pid of the box's pid namespace's PID 1: killing it ends the box (None unisolated)."""
    agent_pid: int | None
    """Host pid of the agent's shell, PID 1 of the agent's own pid namespace; None while the
    box has no agent's shell (or unisolated)."""
    shell_pid: int | None
    """Host pid of the process we started for the agent's shell (``nsenter``; unisolated, the
    bash). In a sandbox the agent's PID 1 (``agent_pid``) leads the shell's session."""
    next_shell_pid: int | None
    """The same for the next episode's shell, started in the background; None when there is
    none, or it is not up yet (:meth:`LocalSandbox.box_info`'s ``wait_s``)."""
    tainted: bool
    """Something ran in the box's own namespaces (no agent's shell was up): the next reset
    replaces the box."""
    etc_template: Path | None
    """The shared ``/etc`` template the box's ``/etc`` is made from."""
    process_limit: Literal["cgroup", "rlimit", "none"]
    """What bounds the sandbox's processes: a pids cgroup, ``RLIMIT_NPROC``, or nothing."""
    pids_cgroup: Path | None
    """The dir of the sandbox's cgroup that holds its pids limit, when there is one (on
    cgroup v2 the same dir holds its memory and CPU limits)."""
    cgroup_dirs: dict[str, Path]
    """The sandbox's cgroup dir by controller (``memory``, ``cpu``, ``pids``): those it has here."""
    disk_bounded: bool
    """The box's writable dirs are on a tmpfs of ``disk`` bytes (root callers)."""
    spawner_pid: int | None = None
    """Host pid of the box's one-off spawner (in the box's pid namespace, not the agent's);
    None where one-offs go through the exec chain (``spawner=False``, it cannot run, or it is gone)."""


class LocalSandbox(_WarmSpare):
    """A sandbox made of Linux namespaces on this machine (no daemon).

    Example:
        >>> with LocalSandbox() as sb:
        ...     _ = sb.shell("cd /tmp && export X=1")
        ...     result = sb.shell("pwd; echo $X")   # one shell: the cwd and variables persist
        >>> result.output, result.exit_code
        ('/tmp\\n1\\n', 0)

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
        spawner: start one-off commands (``run()``, the file helpers) through a small process
            each box keeps for it, out of the agent's reach (one exec a command, not five);
            off, or where it cannot run, they go through the exec chain, with the same result.

    Raises:
        IsolationError: (on start) no namespace tool works and ``allow_unisolated`` is False.
        ConfigError: an option is invalid.
    """

    kind = "local"

    def __init__(self, *, isolation: Isolation = "auto", allow_unisolated: bool = False, pids_limit: int = 512,
                 workdir: str = "/root", env: Mapping[str, str] | None = None, temp_dir: str | None = None,
                 warm_spare: bool = True, runaway_budget: int = DEFAULT_RUNAWAY_BUDGET,
                 network: bool = False, memory: str | int | None = None, cpus: float | str | None = None,
                 disk: str | int | None = None, spawner: bool = True) -> None:
        if runaway_budget < 1:
            raise ConfigError(f"runaway_budget must be >= 1, got {runaway_budget}.")
        if isolation not in ("auto", "bwrap", "unshare", "none"):
            raise ConfigError(f"isolation must be 'auto', 'bwrap', 'unshare' or 'none', got {isolation!r}.")
        if isolation == "none" and not allow_unisolated:
            raise ConfigError("isolation='none' runs agent commands directly on the host; "
                              "pass allow_unisolated=True as well if that is really intended.")
        # Parsed and checked in one place for both backends (limits.py).
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
        self.spawner = spawner
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
        self._pids_refused_seen = 0  # the cgroup is made on start, with none refused
        self._disk_bounded = False  # each box's dir is a tmpfs of `disk` bytes (box_tmpfs)
        self._limits_off: dict[str, str] = {}
        self._prlimit: str | None = None
        self._box: _Box | None = None
        self._state: dict[str, _CopyEntry] | None = None  # what a box's writable dirs start with
        self._etc_bound: list[tuple[str, Path]] | None = None  # the template's read-only binds
        self._spare: Future[_Box] | None = None
        self._worker: ThreadPoolExecutor | None = None  # builds the spare, deletes old dirs
        self._closed = False
        self._faults = {}

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

    # ------------------------------------------------------------------ test hooks

    def box_info(self, *, wait_s: float = 0.0) -> BoxInfo | None:
        """Facts about the current box (:class:`BoxInfo`); None before ``start()`` and after
        ``close()``. A hook for tests and debugging: the sandbox's behaviour does not depend
        on it being called.

        Args:
            wait_s: wait up to this long for the next episode's shell, started in the
                background, to be up (so ``next_shell_pid`` is known).
        """
        box = self._box
        if box is None:
            return None
        next_pid = None
        if box.next_shell is not None:
            with contextlib.suppress(Exception):  # not up (yet), or failed: then None
                next_pid = box.next_shell.result(timeout=wait_s).sid if wait_s > 0 or box.next_shell.done() \
                    else None
        dirs = dict(self._cgroup.dirs) if self._cgroup is not None else {}
        limit: Literal["cgroup", "rlimit", "none"] = "cgroup" if "pids" in dirs else (
            "rlimit" if self._prlimit is not None else "none")
        return BoxInfo(
            box_dir=box.dir, writable_dirs={d: box.writable(d) for d in WRITABLE_DIRS},
            holder_pid=box.holder.pid if box.holder is not None else None, namespace_pid=box.ns_pid,
            agent_pid=self._agent_init(box) if self.mechanism != "none" else None,
            shell_pid=box.shell.sid if box.shell is not None else None, next_shell_pid=next_pid,
            tainted=box.tainted, etc_template=self._etc, process_limit=limit,
            pids_cgroup=dirs.get("pids"), cgroup_dirs=dirs, disk_bounded=self._disk_bounded,
            spawner_pid=next(iter(_children_ints(box.spawner.proc.pid)), None) if box.spawner is not None else None)

    def inject_fault(self, where: ResetFault, error: BaseException) -> None:
        """Make the next reset in place meet ``error`` at ``where`` (once): a hook for the tests
        of what a reset does then (it continues in a new box). ``reset.dirs``: putting the
        writable dirs back (as a full tmpfs would); ``reset.shell``: taking the next episode's
        shell (as one that does not answer would)."""
        self._faults[where] = error

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
            # The box's cgroup, the bounded tmpfs, and one warning for what is off.
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

    def shell_setup(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """As :meth:`shell`, for the task's start script: what it leaves is not watched
        (:meth:`Sandbox.shell_setup <agentunit_gym.backends.sandbox.base.Sandbox.shell_setup>`)."""
        self._setup_command = True
        try:
            return self.shell(command, timeout=timeout, max_output=max_output)
        finally:
            self._setup_command = False

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


