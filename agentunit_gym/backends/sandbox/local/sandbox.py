"""The local sandbox class: its options, start, reset (in place or with a new box) and close,
put together from its parts (:class:`LocalSandbox` lists them)."""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.base import ExecResult, Language, Sandbox
from agentunit_gym.backends.sandbox.limits import Limits, resolve_limits
from agentunit_gym.backends.sandbox.local import box_tmpfs, cgroup
from agentunit_gym.backends.sandbox.local.box import (
    _DEFAULT_ENV,
    _KILL_TIMEOUT_S,
    _Box,
    _Boxes,
)
from agentunit_gym.backends.sandbox.local.etc_template import (
    default_temp_parent,
    release_etc_template,
    shared_etc_template,
)
from agentunit_gym.backends.sandbox.local.files import _Files
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
from agentunit_gym.backends.sandbox.local.oneoff import _OneOffs
from agentunit_gym.backends.sandbox.local.procfs import _children_ints
from agentunit_gym.backends.sandbox.local.reset import _InPlaceReset
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.backends.sandbox.local.shell import _AgentShell
from agentunit_gym.backends.sandbox.local.spare import _Spares
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


class LocalSandbox(Sandbox):
    """A sandbox made of Linux namespaces on this machine (no daemon).

    Put together from parts with narrow interfaces, each in its own module, sharing the
    options and what ``start()`` set up (:class:`~.setup._Setup`): the boxes' processes
    (:class:`~.box._Boxes`), one-off commands (:class:`~.oneoff._OneOffs`), files
    (:class:`~.files._Files`), the agent's shell (:class:`~.shell._AgentShell`), the reset
    in place (:class:`~.reset._InPlaceReset`) and new boxes with the warm spare
    (:class:`~.spare._Spares`).

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
        limits = resolve_limits(memory=memory, cpus=cpus, pids=pids_limit, disk=disk)
        if not posixpath.isabs(workdir):
            raise ConfigError(f"workdir must be an absolute path, got {workdir!r}.")
        self._setup = setup = _Setup(
            isolation_requested=isolation, allow_unisolated=allow_unisolated, limits=limits,
            runaway_budget=runaway_budget, network=network, workdir=workdir, warm_spare=warm_spare,
            spawner=spawner, env={**_DEFAULT_ENV, **(env or {})}, temp_parent=temp_dir, layout=system_layout(),
            owner_uid=ROOT_CALLER_UID if os.geteuid() == 0 and isolation != "none" else None)
        self._boxes = _Boxes(setup)
        self._shells = _AgentShell(setup, self._boxes)
        self._one_offs = _OneOffs(setup, self._boxes, self._shells)
        self._files = _Files(setup, self._boxes, self._one_offs)
        self._resets = _InPlaceReset(setup, self._boxes, self._shells, self._one_offs)
        self._spares = _Spares(setup, self._boxes, self._shells, self._resets, self._one_offs)
        self._box: _Box | None = None

    # ------------------------------------------------------------------ options

    @property
    def isolation_requested(self) -> Isolation:
        return self._setup.isolation_requested

    @property
    def allow_unisolated(self) -> bool:
        return self._setup.allow_unisolated

    @property
    def limits(self) -> Limits:
        return self._setup.limits

    @property
    def pids_limit(self) -> int:
        return self._setup.pids_limit

    @property
    def runaway_budget(self) -> int:
        return self._setup.runaway_budget

    @property
    def network(self) -> bool:
        return self._setup.network

    @property
    def workdir(self) -> str:
        return self._setup.workdir

    @property
    def warm_spare(self) -> bool:
        return self._setup.warm_spare

    @property
    def spawner(self) -> bool:
        return self._setup.spawner

    @property
    def mechanism(self) -> Literal["bwrap", "unshare", "none"] | None:
        """The isolation in use once started."""
        return self._setup.mechanism

    @property
    def _closed(self) -> bool:
        return self._setup.closed

    @property
    def multi_user(self) -> bool:
        """Whether the sandbox maps many users (``su``, ``chown jack``, ``runuser`` work): only when
        the caller is root, the host uid range is free and a pids cgroup bounds the sandbox
        (:mod:`~agentunit_gym.backends.sandbox.usermap`). Before ``start()``, what start will decide."""
        if self._setup.multi_user is not None:
            return self._setup.multi_user
        requested = self._setup.isolation_requested
        return requested != "none" and usermap.user_switching(requested).ok and cgroup.controller_available("pids")

    @property
    def limits_off(self) -> dict[str, str]:
        """The limits this host cannot enforce (``memory``, ``cpu``, ``pids``, ``disk``), each with
        the reason; empty when all apply. Known after ``start()``."""
        return dict(self._setup.limits_off)

    @property
    def host_dir(self) -> Path | None:
        """The sandbox's private temp dir on the host (all its writable dirs live under it);
        None before ``start()`` and after ``close()``."""
        return self._setup.root

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
        dirs = dict(self._setup.cgroup.dirs) if self._setup.cgroup is not None else {}
        limit: Literal["cgroup", "rlimit", "none"] = "cgroup" if "pids" in dirs else (
            "rlimit" if self._setup.prlimit is not None else "none")
        return BoxInfo(
            box_dir=box.dir, writable_dirs={d: box.writable(d) for d in WRITABLE_DIRS},
            holder_pid=box.holder.pid if box.holder is not None else None, namespace_pid=box.ns_pid,
            agent_pid=self._boxes.agent_init(box) if self._setup.mechanism != "none" else None,
            shell_pid=box.shell.sid if box.shell is not None else None, next_shell_pid=next_pid,
            tainted=box.tainted, etc_template=self._setup.etc, process_limit=limit,
            pids_cgroup=dirs.get("pids"), cgroup_dirs=dirs, disk_bounded=self._setup.disk_bounded,
            spawner_pid=next(iter(_children_ints(box.spawner.proc.pid)), None) if box.spawner is not None else None)

    def inject_fault(self, where: ResetFault, error: BaseException) -> None:
        """Make the next reset in place meet ``error`` at ``where`` (once): a hook for the tests
        of what a reset does then (it continues in a new box). ``reset.dirs``: putting the
        writable dirs back (as a full tmpfs would); ``reset.shell``: taking the next episode's
        shell (as one that does not answer would)."""
        self._setup.faults[where] = error

    # ------------------------------------------------------------------ commands and files

    def _current(self) -> _Box:
        self.start()
        assert self._box is not None
        return self._box

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
        return self._shells.shell(self._current(), command, timeout=timeout, max_output=max_output)

    def shell_setup(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """As :meth:`shell`, for the task's start script: what it leaves is not watched
        (:meth:`Sandbox.shell_setup <agentunit_gym.backends.sandbox.base.Sandbox.shell_setup>`)."""
        if timeout <= 0 or max_output < 0:
            raise ConfigError(f"timeout must be > 0 and max_output >= 0, got {timeout!r}, {max_output!r}.")
        return self._shells.shell(self._current(), command, timeout=timeout, max_output=max_output, watch=False)

    def run(self, command: str, *, timeout: float = 30.0, language: Language = "bash",
            args: tuple[str, ...] = (), max_output: int = 1 << 20) -> ExecResult:
        """Run a one-off command as root in the sandbox's namespaces, outside the agent's shell.

        Raises:
            ConfigError: unknown ``language``.
            BackendError: the sandbox died (call ``reset()``).
        """
        return self._one_offs.run(self._current(), command, timeout=timeout, language=language, args=args,
                                  max_output=max_output)

    def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> bytes:
        """The content of a file as the sandbox sees it.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a directory.
            BackendError: the file is larger than ``max_bytes``.
        """
        return self._files.read_file(self._current(), path, max_bytes=max_bytes)

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file in one of the writable dirs (parents are created).

        Raises:
            BackendError: ``path`` is outside the writable dirs (the host root is read-only here).
        """
        self._files.write_file(self._current(), path, data, mode=mode)

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
        setup = self._setup
        if setup.mechanism is None:
            setup.mechanism = self._choose_mechanism()
            if setup.mechanism == "none":
                setup.owner_uid = None
        if setup.root is None:
            parent = Path(setup.temp_parent) if setup.temp_parent else default_temp_parent()
            if setup.owner_uid is not None:
                _check_traversable(parent, setup.owner_uid)
            setup.root = Path(tempfile.mkdtemp(prefix="agentunit-gym-local-", dir=parent))
            if setup.mechanism != "none":
                # The template each box's /etc is copied from (its big trees bound read-only).
                setup.etc = shared_etc_template(parent, setup.owner_uid, setup.network)
                if setup.owner_uid is not None:
                    os.lchown(setup.root, setup.owner_uid, setup.owner_uid)
            # The box's cgroup, the bounded tmpfs, and one warning for what is off.
            setup.cgroup = box_cgroup = cgroup.BoxCgroup.create(setup.limits)
            pids_cgroup = "pids" in box_cgroup.controllers
            setup.prlimit = process.which("prlimit") if not pids_cgroup else None
            setup.disk_bounded = setup.mechanism != "none" and box_tmpfs.can_mount()
            setup.limits_off = cgroup.limits_off(box_cgroup, setup.disk_bounded, setup.mechanism,
                                                 rlimit_nproc=setup.prlimit is not None)
            cgroup.warn_limits_off(setup.limits_off)
            setup.multi_user = self._decide_multi_user()
            root_unbound = os.geteuid() == 0 and setup.owner_uid is None  # unisolated root
            if not pids_cgroup and (root_unbound or setup.prlimit is None):
                logger.warning("local sandbox: no writable pids cgroup and %s, so no process limit applies; "
                               "commands still time out.",
                               "running as root (RLIMIT_NPROC does not bind root)" if root_unbound
                               else "no `prlimit` (util-linux) to set RLIMIT_NPROC")
        self._box = self._spares.take() or self._spares.make_box()
        self._resets.launch_next_shell(self._box)

    def reset(self) -> None:
        """Kill every process of the episode, discard what it wrote, and start a new shell.

        In place when that is safe (:meth:`~.reset._InPlaceReset.recycle`: the box keeps its
        holder and namespaces), else in a new box (the warm spare when it is ready): new namespaces, dirs and shell.

        Raises:
            BackendError / BackendTimeoutError: the new sandbox did not come up.
        """
        if self._closed:
            raise BackendError("this LocalSandbox is closed; create a new one.")
        box, self._box = self._box, None
        if box is not None:
            try:
                if self._resets.recycle(box):
                    self._box = box
                    return
            except (BackendError, BackendTimeoutError, OSError) as exc:
                # OSError: putting the dirs back failed (a full tmpfs): the box goes, as any other.
                logger.warning("local sandbox: resetting the box in place failed (%s); starting a new one", exc)
            # Killing is synchronous: nothing of the old episode runs once reset returns.
            # Deleting its files is not (it costs 5-20 ms here); they are out of sight already.
            self._boxes.stop_box(box)
            self._setup.in_background(_rmtree, box.dir)
        self.start()
        self._spares.launch()  # for the next reset that cannot be done in place

    def close(self) -> None:
        """Kill every process, remove the temp dirs and the cgroup. Idempotent."""
        if self._setup.closed:
            return
        self._setup.closed = True
        try:
            box, self._box = self._box, None
            if box is not None:
                self._boxes.stop_box(box)
        finally:
            if self._setup.worker is not None:
                # Let the spare finish starting (its start has a deadline) and old dirs go.
                self._setup.worker.shutdown(wait=True)
                self._setup.worker = None
            spare, self._spares.spare = self._spares.spare, None
            if spare is not None and spare.exception() is None:
                self._boxes.stop_box(spare.result())
            if self._setup.cgroup is not None:
                if not self._setup.cgroup.remove(time.monotonic() + _KILL_TIMEOUT_S):
                    logger.warning("could not remove cgroup %s (processes still exiting)", self._setup.cgroup.dirs)
                self._setup.cgroup = None
            if self._setup.root is not None:
                _rmtree(self._setup.root)
                self._setup.root = None
            etc, self._setup.etc = self._setup.etc, None
            if etc is not None:
                release_etc_template(etc)

    def __del__(self) -> None:  # last resort: do not leave a holder behind
        with contextlib.suppress(Exception):
            if not getattr(self, "_closed", True):
                self.close()

    def _decide_multi_user(self) -> bool:
        if self._setup.mechanism == "none":
            return False
        support = usermap.user_switching(self._setup.mechanism or "auto")
        if support.ok and (self._setup.cgroup is None or "pids" not in self._setup.cgroup.controllers):
            # RLIMIT_NPROC counts per uid: with many users it would no longer bound the sandbox.
            support = usermap.Support(False, "no writable pids cgroup to bound the sandbox's processes")
        logger.debug("local sandbox: %s user: %s", "many" if support.ok else "one", support.reason)
        return support.ok

    def _choose_mechanism(self) -> Literal["bwrap", "unshare", "none"]:
        if self._setup.isolation_requested == "none":
            return "none"
        tools = ("nsenter", "setsid", "unshare", "setpriv")
        missing = [tool for tool in tools if process.which(tool) is None]
        if missing and not self._setup.allow_unisolated:
            raise IsolationError(f"the local sandbox needs {' and '.join(missing)} (util-linux) to enter its "
                                 "namespaces and limit the agent's capabilities"
                                 + (" (and, as root, to map root inside to an unprivileged host uid)"
                                    if "setpriv" in missing and drop_privileges_argv() else "")
                                 + "; install util-linux, or use backend='docker'.")
        found = detect_isolation(self._setup.isolation_requested) if not missing else None
        if found is not None:
            return found
        if self._setup.allow_unisolated:
            logger.warning("local sandbox: no namespace isolation available; running commands UNISOLATED "
                           "on the host (allow_unisolated=True).")
            return "none"
        requested = self._setup.isolation_requested
        wanted = "bubblewrap or unshare" if requested == "auto" else requested
        raise IsolationError(
            f"the local sandbox needs Linux namespaces, but {wanted} could not create them here. "
            "Install bubblewrap (apt-get install bubblewrap), or enable unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces>0; on Ubuntu 24.04+ also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or use backend='docker'. To run agent commands "
            "directly on the host with no protection, pass allow_unisolated=True."
        )


