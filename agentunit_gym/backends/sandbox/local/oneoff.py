"""One-off commands in a local sandbox's box (``run()``, the file helpers, a task's init and
check scripts): through the box's spawner, else the exec chain."""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence

from agentunit_gym.backends.sandbox.base import ExecResult, Language
from agentunit_gym.backends.sandbox.local.box import (
    _CHUNK,
    _KILL_TIMEOUT_S,
    _SPAWNER_ENV,
    _START_TIMEOUT_S,
    _Box,
    _Boxes,
    _result,
    died_error,
)
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.backends.sandbox.local.shell import _AgentShell
from agentunit_gym.backends.sandbox.local.spawner import OneOff, Spawner, SpawnerUnavailable
from agentunit_gym.errors import BackendTimeoutError, ConfigError
from agentunit_gym.images.os.shell_protocol import AGENT_OOM_SCORE_ADJ, Capture

logger = logging.getLogger("agentunit_gym")


class _OneOffs:
    """One-off commands, outside the agent's shell, as root in the agent's namespaces. Before
    each, a box the agent left at its pids limit is cleared (:meth:`_AgentShell.clear_full_box`)."""

    def __init__(self, setup: _Setup, boxes: _Boxes, shells: _AgentShell) -> None:
        self.setup, self.boxes, self.shells = setup, boxes, shells

    def run(self, box: _Box, command: str, *, timeout: float, language: Language, args: tuple[str, ...],
            max_output: int) -> ExecResult:
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
        return self.exec(box, argv, timeout=timeout, max_output=max_output)

    def start_spawner(self, box: _Box) -> None:
        """Start the box's one-off spawner (:mod:`.spawner`), before the agent runs anything in
        the box, with an environment of its own (``TZ`` set: no zone file read as the box's root)."""
        if not self.setup.spawner or self.setup.mechanism == "none":
            return
        assert box.ns_pid is not None  # the holder is up: the spawner starts in its namespaces
        try:
            box.spawner = Spawner.start(lambda argv, fd: self.boxes.spawn(
                self.boxes.enter_argv(box, argv, new_shell=True), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, in_sandbox=False, pass_fds=(fd,), env=_SPAWNER_ENV),
                time.monotonic() + _START_TIMEOUT_S, reaper=box.ns_pid)
        except SpawnerUnavailable as exc:
            logger.debug("local sandbox: no one-off spawner in this box (the exec chain instead): %s", exc)

    @staticmethod
    def _drop_spawner(box: _Box, spawner: Spawner, *, respawn: bool = False) -> None:
        with box.spawner_lock:
            if box.spawner is spawner:
                box.spawner = None
                box.respawn = respawn
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    spawner.close()

    def _start_one_off(self, box: _Box, argv: Sequence[str], deadline: float) -> subprocess.Popen[bytes] | OneOff:
        """Start a one-off command in the agent's namespaces: through the box's spawner, else
        (no agent shell, no spawner in this box, or it refused) through the exec chain.

        Raises:
            subprocess.TimeoutExpired: the spawner did not start it by ``deadline``.
        """
        spawner = box.spawner
        init = self.boxes.agent_init(box) if spawner is not None else None
        if spawner is not None and init is not None:
            nproc = self.setup.pids_limit if self.setup.prlimit is not None and "pids" not in (
                self.setup.cgroup.controllers if self.setup.cgroup is not None else ()) else None
            # The chain raises the OOM score in its cgroup join: without a cgroup, neither does this.
            oom = AGENT_OOM_SCORE_ADJ if self.setup.cgroup is not None and self.setup.cgroup.dirs else None
            try:
                return spawner.run(argv, agent_init=init, cwd=self.setup.workdir, env=self.setup.env, oom_score_adj=oom,
                                   nproc=nproc, deadline=deadline)
            except SpawnerUnavailable as exc:
                logger.debug("local sandbox: a one-off goes through the exec chain: %s", exc)
                if exc.gone:
                    self._drop_spawner(box, spawner)
            except subprocess.TimeoutExpired:
                if spawner.stalled:  # held in the middle of a start: the box's next one-offs take the chain
                    logger.debug("local sandbox: the spawner stalled in a start; one-offs go through the exec chain")
                    self._drop_spawner(box, spawner, respawn=True)
                raise
        return self.boxes.spawn(self.boxes.enter_argv(box, argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, in_sandbox=True)

    def exec(self, box: _Box, argv: Sequence[str], *, timeout: float, max_output: int,
             capture: Capture | None = None) -> ExecResult:
        """A one-off command (``run()``, the file helpers), after clearing a box the agent left
        full; the forks the pids limit refuses it are its own, not the agent shell's flood."""
        self.shells.clear_full_box(box)
        try:
            return self._exec(box, argv, timeout=timeout, max_output=max_output, capture=capture)
        finally:
            if self.setup.cgroup is not None:
                self.setup.pids_refused_seen = self.shells.refused_forks()

    def _exec(self, box: _Box, argv: Sequence[str], *, timeout: float, max_output: int,
              capture: Capture | None) -> ExecResult:
        if not self.boxes.box_alive(box):
            raise died_error()
        started = time.monotonic()
        capture = capture if capture is not None else Capture(max_output)
        deadline = started + timeout
        try:
            proc = self._start_one_off(box, argv, deadline)
        except subprocess.TimeoutExpired:  # the spawner did not start it in time (a throttled box)
            return _result(capture, None, True, started)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
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
                    capture.feed(chunk)
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
                    if isinstance(proc, OneOff):
                        proc.kill()
                    else:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(proc.pid, signal.SIGKILL)
                    try:
                        proc.wait(timeout=_KILL_TIMEOUT_S)
                    except subprocess.TimeoutExpired as exc:
                        raise BackendTimeoutError(f"a command in the local sandbox (pid {proc.pid}) did not "
                                                  "exit after SIGKILL.") from exc
            finally:
                proc.stdout.close()
                if isinstance(proc, OneOff):
                    proc.close()
        if not timed_out and not self.boxes.box_alive(box):
            raise died_error()
        return _result(capture, None if timed_out else code, timed_out, started)

