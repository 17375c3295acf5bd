"""The agent's shell driver, one for both sandboxes: the docker supervisor and the local sandbox.

:class:`ShellDriver` is the state machine of the agent's persistent shell: it sends a command
to the shell that reads the terminal now (the outermost one, or one the agent started:
``bash``, ``su - jack``), reads the output up to that line's sentinel, notices a new
interactive shell taking the terminal over (enters it: sets it up, makes it the top level),
drops the shells that have exited (a lower line's sentinel shows), and after a timeout
stops what hangs (the foreground job, then Ctrl-C and a resynchronising line, then ending a
nested shell that does not answer). It says when the outermost shell is gone or stuck, so
its owner starts a new one.

How bytes reach the shell and how processes are found and killed differ by sandbox: that is
a :class:`Transport` (the supervisor's ``Shell`` in the container; the local sandbox's
``_LocalTerminal``). Standard library only: the docker sandbox sends this file into the
container with ``shell_protocol.py`` and the supervisor.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from agentunit_gym.images.os.shell_protocol import (
    EXITED_NOTE,
    NESTED_KILLED_NOTE,
    RESTARTED_NOTE,
    SHELL_SETUP,
    Capture,
    Level,
    interactive_shell,
    new_nonce,
    runaway_note,
    settle,
    waiting_nonces,
)

QUIET_S = 0.02
"""A quiet terminal is looked at for a new shell this often (seen twice in a row: it waits)."""
SETUP_S = (1.0, 5.0)
"""How long a new shell gets to answer its set-up line: at least, at most (within the deadline)."""
FOREGROUND_KILLED_S = 0.5
"""After a timeout, how long the shell gets to report once its foreground job is killed."""
RESYNC_S = 1.0
"""How long a shell gets to answer a resynchronising line after Ctrl-C, and the shell below a
killed nested one to report."""
INTERRUPT_TRIES = 3
INTERRUPT_SETTLE_S = 0.05
"""Between Ctrl-C and the resynchronising line: the signal is handled before the line is read."""
DISCARD_S = 0.2
"""How long output waiting on the terminal is drained at most (what killed processes printed)."""

State = Literal["done", "timeout", "gone", "nested"]
"""What a read ended with: a sentinel of the accepted nonces ("done"), the deadline, the shell's
end (EOF on the terminal or its process exited), or a new shell waiting at the terminal."""
Ended = Literal["exited", "stuck"]
"""Why the outermost shell must be replaced: it exited (``exit``, ``exec true``, killed), or it
did not answer after a timeout (a loop of builtins at the outermost level)."""


class OuterPipe(Protocol):
    """An outermost shell that reads its commands from a pipe of its own (the local driver
    loop), not from the terminal: Ctrl-C and a resynchronising line cannot unstick it."""

    grace_s: float
    """After :meth:`stop`, how long the shell gets to report."""

    def send(self, command: str, nonce: str) -> None:
        """Hand ``command`` under ``nonce`` to the shell. Raises OSError when it is gone."""

    def stop(self, before: set[int]) -> None:
        """After a timeout: kill what the command started (``before``: the processes there before it)."""


class Transport(Protocol):
    """How a :class:`ShellDriver` reaches the agent's terminal and processes."""

    runaway_budget: int

    @property
    def pipe(self) -> OuterPipe | None:
        """The outermost shell's own pipe; None when it reads the terminal (docker: an
        interactive bash), where Ctrl-C and a resynchronising line unstick it too."""

    def write_terminal(self, data: bytes, deadline: float) -> None:
        """Write ``data`` to the terminal's input. Raises OSError when it does not take it."""

    def read(self, wait: float) -> bytes | None:
        """What the terminal printed within ``wait`` seconds: None when nothing came, ``b""``
        when the shell is gone."""

    def foreground_group(self) -> int | None:
        """The terminal's foreground process group; None when unknown."""

    def ours(self) -> set[int]:
        """Pids besides the levels' that are ours, never a job to kill or a new shell."""

    def kill(self, pid: int, sig: int, *, group: bool) -> None:
        """Signal ``pid`` (its process group with ``group``); a process that is gone is no error."""

    def flush_input(self) -> None:
        """Drop what was written to the terminal and not read (lines for a killed shell)."""

    def processes(self) -> set[int]:
        """The agent's processes now (a runaway check's baseline)."""

    def contain_runaways(self, before: set[int], levels: list[Level]) -> int:
        """Kill what the command left when it is a flood; how many processes were killed."""

    def exit_status(self) -> int | None:
        """The outermost shell's exit status once it is gone (None: unknown)."""


@dataclass
class Report:
    """What one command did, as the driver saw it."""

    capture: Capture
    exit_code: int | None
    timed_out: bool
    ended: Ended | None = None
    """Set when the outermost shell must be replaced (its note is in the output already)."""
    shell_exit: int | None = None
    """The outermost shell's own exit status when it ``exited``."""
    before: frozenset[int] = frozenset()
    """The agent's processes before the command (what a replacement must not kill)."""


class ShellDriver:
    """The agent's shell seen through ``transport``: commands, nested shells, timeouts.

    ``levels`` starts with the outermost shell; a shell the agent starts that then waits at the
    terminal is pushed on top and gets the next commands until it exits (its line in the shell
    below then prints that line's sentinel, see :func:`settle`). Output that follows a sentinel
    (a background job writing between commands) waits in ``pending`` for the next command.
    """

    def __init__(self, transport: Transport, outer: Level) -> None:
        self.transport = transport
        self.levels = [outer]
        self.pending = bytearray()
        self.settled: set[int] | None = None
        """The agent's processes after the last command's runaway check."""
        self.found: str | None = None
        """The nonce whose sentinel the last read saw."""
        self.outer_nonce = ""
        """The nonce of the last line the outermost shell was sent."""
        self._candidate: tuple[int, str] = (0, "")

    # ------------------------------------------------------------------ one command

    def run(self, command: str, timeout: float, limit: int, *, watch: bool = True) -> Report:
        """Run ``command`` in the top shell; its output (at most ``limit`` bytes kept) and status.

        ``watch``: judge what the command leaves running (a flood is killed); False for the
        task's own start script, trusted as the one-offs are."""
        deadline = time.monotonic() + timeout
        cap = Capture(limit)
        if self.pending:
            cap.feed(bytes(self.pending))
            self.pending.clear()
        # What was there when the last command was settled: processes forked since by its
        # background jobs count as new too, so a bomb that started slowly is caught later.
        before = self.settled if self.settled is not None else self.transport.processes()
        try:
            nonce = self.send(command, deadline)
        except OSError:  # the shell is gone
            return self._ended(cap, before, timed_out=False)
        rejected: set[int] = set()
        state: str
        while True:
            state = self.read(cap, {nonce, *waiting_nonces(self.levels)}, deadline, watch=rejected)
            if state != "nested":
                break
            state = self._enter_nested(nonce, cap, deadline)
            if state != "again":
                break
            rejected.add(self._candidate[0])  # it looked like a shell waiting, but took no commands
        if state == "nested":  # the new shell took over; the command runs on below it
            return self._finish(cap, 0, before, timed_out=False, watch=watch)
        if state == "done":
            settle(self.levels, self.found, cap.found)
            return self._finish(cap, cap.found, before, timed_out=False, watch=watch)
        if state == "gone":
            return self._ended(cap, before, timed_out=False)
        stopped = self._stop(cap, nonce, before)
        if stopped == "done":
            return self._finish(cap, None, before, timed_out=True, watch=watch)
        if stopped == "gone":
            return self._ended(cap, before, timed_out=True)
        cap.finish()
        cap.note(RESTARTED_NOTE)
        return Report(cap, None, True, ended="stuck", before=frozenset(before))

    def roundtrip(self, command: str, timeout: float) -> int | None:
        """Run a command of ours (set-up, a first answer) and return its status, None if it did
        not report in time; no runaway check, its output is dropped."""
        deadline = time.monotonic() + timeout
        try:
            nonce = self.send(command, deadline)
        except OSError:
            return None
        cap = Capture(0)
        if self.read(cap, {nonce, *waiting_nonces(self.levels)}, deadline) != "done":
            return None
        settle(self.levels, self.found, cap.found)
        return cap.found

    def discard_pending(self) -> None:
        """Drop output waiting on the terminal (it would open the next command's output)."""
        self.pending.clear()
        deadline = time.monotonic() + DISCARD_S
        while time.monotonic() < deadline:
            if not self.transport.read(QUIET_S):  # quiet, or gone
                return

    # ------------------------------------------------------------------ sending and reading

    def send(self, command: str, deadline: float) -> str:
        """Send ``command`` to the top shell under a fresh nonce, which is returned."""
        nonce = new_nonce()
        top, pipe = len(self.levels) == 1, self.transport.pipe
        if top and pipe is not None:
            pipe.send(command, nonce)
        else:
            # One line, so the shell has all of it before the command runs: a command reading
            # stdin cannot swallow the sentinel's printf.
            self.transport.write_terminal(self.levels[-1].line(command, nonce).encode("utf-8", "surrogateescape"),
                                          deadline)
        if top:
            self.outer_nonce = nonce
        return nonce

    def read(self, cap: Capture, accept: set[str], deadline: float, watch: set[int] | None = None) -> State:
        """Read into ``cap`` until a sentinel of ``accept`` ("done": ``found`` is its nonce, what
        followed it goes to ``pending``), the deadline, the shell's end, or, with ``watch`` (the
        pids to pass over), a new shell waiting at the terminal ("nested")."""
        cap.expect(accept)
        seen: tuple[int, str] | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                cap.finish()
                return "timeout"
            data = self.transport.read(min(left, QUIET_S) if watch is not None else left)
            if data is None:
                if watch is not None:
                    # Seen idle twice in a row (QUIET_S apart) with nothing printed between.
                    new = self._new_shell(watch)
                    if new is not None and new == seen:
                        self._candidate = new
                        cap.finish()
                        return "nested"
                    seen = new
                continue
            if not data:
                cap.finish()
                return "gone"
            seen = None
            cap.feed(data)
            if cap.found is not None:
                self.pending += cap.after
                self.found = cap.found_nonce
                return "done"

    def _new_shell(self, passed: set[int]) -> tuple[int, str] | None:
        """A shell in the terminal's foreground that is not one of ours yet, idle at the terminal."""
        group = self.transport.foreground_group()
        if group is None or group in passed or group in self.transport.ours() \
                or any(level.pid == group for level in self.levels):
            return None
        name = interactive_shell(group)  # job control: a shell leads its own process group
        return (group, name) if name is not None else None

    # ------------------------------------------------------------------ shells that nest

    def _enter_nested(self, nonce: str, cap: Capture, deadline: float) -> str:
        """A new shell waits at the terminal: make it the top level and set it up.

        Returns "nested" when it answered; "done" when a line below reported meanwhile (the
        command's own: the new shell exited at once; or a lower one: the shells above it exited
        too), with ``cap.found`` its status; "gone" when the outermost shell ended; "again"
        when it took no commands (the command is then waited for as before)."""
        cap.drop_partial_line()  # its first prompt
        self.levels[-1].waiting = nonce
        self.levels.append(Level(*self._candidate))
        now = time.monotonic()
        try:
            setup = self.send(SHELL_SETUP, deadline)
        except OSError:
            setup = ""
        answer = Capture(0)
        state = self.read(answer, {setup, *waiting_nonces(self.levels)} - {""},
                          max(now + SETUP_S[0], min(now + SETUP_S[1], deadline)))
        if state == "done" and self.found == setup:
            return "nested"
        if state == "done":  # settled by the caller: the levels above the one that reported go
            cap.found, cap.found_nonce = answer.found, self.found
            return "done"
        self.levels.pop()
        self.levels[-1].waiting = None
        if state == "gone":
            return "gone"
        self.transport.flush_input()  # our set-up line must not reach whatever reads the terminal next
        return "again"

    # ------------------------------------------------------------------ after a timeout

    def _kill_foreground(self, sig: int) -> bool:
        """Signal the terminal's foreground process group unless it is one of our shells'."""
        group = self.transport.foreground_group()
        if group is None or group <= 1 or group in self.transport.ours() \
                or any(level.pid == group for level in self.levels):
            return False
        self.transport.kill(group, sig, group=True)
        return True

    def _on_terminal(self) -> bool:
        return len(self.levels) > 1 or self.transport.pipe is None

    def _stop(self, cap: Capture, nonce: str, before: set[int]) -> str:
        """After a timeout: stop what hangs and get a shell that answers ("done"); "gone" when
        the outermost shell ended, "stuck" when it does not answer.

        1. Kill the terminal's foreground process group; the line's printf then reports.
        2. The top shell itself is busy (a loop of builtins, ``read``): Ctrl-C, i.e. SIGINT to
           the foreground group and the shell, which abandons the line; then resynchronise with
           an empty command (a few tries, in case the signal lands late).
        3. A nested shell that still does not answer is killed: the shell below it (whose line
           started it) reports, and is the agent's shell again.
        4. An outermost shell that reads its commands from a pipe: the pipe's owner kills what
           the command started, and the shell reports.
        """
        state: str
        if self._on_terminal() and self._kill_foreground(signal.SIGKILL):
            state = self.read(cap, {nonce, *waiting_nonces(self.levels)}, time.monotonic() + FOREGROUND_KILLED_S)
            if state == "done":
                settle(self.levels, self.found, cap.found)
            if state != "timeout":
                return state
        cap.finish()
        while self._on_terminal():
            top = self.levels[-1]
            for _ in range(INTERRUPT_TRIES):
                self._kill_foreground(signal.SIGINT)
                self.transport.kill(top.pid, signal.SIGINT, group=False)
                time.sleep(INTERRUPT_SETTLE_S)
                state = self._answer(":", RESYNC_S)
                if state != "timeout":
                    return state
            if len(self.levels) == 1:
                return "stuck"
            cap.note(NESTED_KILLED_NOTE)
            self.transport.kill(top.pid, signal.SIGKILL, group=True)
            self.transport.kill(top.pid, signal.SIGKILL, group=False)
            self.levels.pop()
            self.transport.flush_input()  # the resync lines it never read
            waiting = self.levels[-1].waiting
            if waiting is not None:
                answer = Capture(0)
                state = self.read(answer, {waiting}, time.monotonic() + RESYNC_S)
                if state == "done":
                    settle(self.levels, self.found, answer.found)
                if state != "timeout":
                    return state
        pipe = self.transport.pipe
        assert pipe is not None  # the loop above ran to the outermost level otherwise
        pipe.stop(before)
        state = self.read(cap, {self.outer_nonce}, time.monotonic() + pipe.grace_s)
        if state == "done":
            settle(self.levels, self.found, cap.found)
            return "done"
        return "gone" if state == "gone" else "stuck"

    def _answer(self, command: str, timeout: float) -> str:
        """Send one command of ours and read its answer (or a lower line's): the read's state."""
        deadline = time.monotonic() + timeout
        try:
            nonce = self.send(command, deadline)
        except OSError:
            return "timeout"
        answer = Capture(0)
        state = self.read(answer, {nonce, *waiting_nonces(self.levels)}, deadline)
        if state == "done":
            settle(self.levels, self.found, answer.found)
        return state

    # ------------------------------------------------------------------ endings

    def _finish(self, cap: Capture, code: int | None, before: set[int], *, timed_out: bool,
                watch: bool = True) -> Report:
        """The shell answers: check what the command left running, and report."""
        cap.finish()
        killed = self.transport.contain_runaways(before, self.levels) if watch else 0
        self.settled = self.transport.processes()
        if killed:
            self.discard_pending()  # what the killed processes printed ("fork: retry: ...")
            cap.note(runaway_note(killed, self.transport.runaway_budget))
        return Report(cap, code, timed_out, before=frozenset(before))

    def _ended(self, cap: Capture, before: set[int], *, timed_out: bool) -> Report:
        """The outermost shell is gone: report its status; its owner starts a new one."""
        code = self.transport.exit_status()
        cap.finish()
        cap.note(RESTARTED_NOTE if timed_out else EXITED_NOTE)
        return Report(cap, None if timed_out else code, timed_out, ended="exited", shell_exit=code,
                      before=frozenset(before))
