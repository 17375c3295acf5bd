"""The agent's persistent shell: the driver, the sentinels, shells that nest, timeouts and
what a command left running."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import signal
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agentunit_gym.backends.sandbox.base import ExecResult
from agentunit_gym.backends.sandbox.limits import add_memory_note
from agentunit_gym.backends.sandbox.local.box import (
    _CHUNK,
    _KILL_ROUNDS_S,
    _KILL_TIMEOUT_S,
    _SHELL_GRACE_S,
    _START_TIMEOUT_S,
    _Box,
    _result,
    _Shell,
)
from agentunit_gym.backends.sandbox.local.files import _Files
from agentunit_gym.backends.sandbox.local.hostfs import (
    _read_small_file,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    _AGENT_INIT,
    agent_caps_argv,
    bwrap_agent_argv,
    tool_path,
)
from agentunit_gym.backends.sandbox.local.procfs import (
    _children_ints,
    _inner_pid,
    _ns_pgid,
    _pids_in_namespace,
    _proc_stat_fields,
    _read_proc_stat,
    _scan_processes,
)
from agentunit_gym.errors import BackendTimeoutError, ConfigError
from agentunit_gym.images.os.shell_protocol import (
    EXITED_NOTE,
    NESTED_KILLED_NOTE,
    RESTARTED_NOTE,
    SHELL_SETUP,
    Capture,
    Level,
    at_pids_limit,
    flush_terminal_input,
    interactive_shell,
    is_flood,
    new_nonce,
    runaway_note,
    settle,
    waiting_nonces,
)

USER_SWITCH_NOTE = ("\n[the local sandbox maps one user only (root): su, runuser and setpriv cannot switch to "
                    "another user here (only a sandbox started by root maps many); switching users needs the docker "
                    "sandbox]\n")
"""Added to the output of a command that failed to switch users (``su - jack``)."""
_USER_SWITCH_FAILURES = ("cannot set groups: Operation not permitted", "setresuid failed: Invalid argument",
                         "setgid: Invalid argument", "setuid: Invalid argument")


# The agent's shell: an interactive bash whose stdin, stdout and stderr are a terminal that
# is also its controlling terminal, like the docker sandbox's shell and AgentBench's (``ls``
# formats for a tty, ``cat`` waits for terminal input until the timeout, errors read
# "bash: x: command not found", job control gives every job its own process group).
# Commands arrive NUL-terminated as "<nonce>\n<command>" on a separate pipe (fd $3) and run
# in this shell, so cwd, variables and jobs persist. ``jobs -p`` goes to a file before each
# command so a timeout can spare the background jobs started earlier. The sentinel follows
# the output on the terminal, framed as the docker supervisor's (images/os/shell_protocol.py).
# ``$?`` is set back to the last command's status before the next one runs.
_DRIVER = r"""
__au_fd=$3; exec {__au_in}<&"$__au_fd" {__au_out}>&1 {__au_fd}<&-
unset HISTFILE; set +H; PS1= PS2=
cd "$1" 2>/dev/null || cd /
__au_jobs=$2
set --
__au_st=0
while IFS= read -r -d '' -u "$__au_in" __au_msg; do
  __au_nonce=${__au_msg%%$'\n'*}
  jobs -p >"$__au_jobs" 2>/dev/null
  [ "$__au_st" = 0 ] || (exit "$__au_st")
  eval "${__au_msg#*$'\n'}"
  __au_st=$?
  printf '\036AU%s:%d\036' "$__au_nonce" "$__au_st" >&"$__au_out"
done
"""


class _AgentShell(_Files):
    """The agent's persistent shell: the driver, sentinels, shells that nest, timeouts and runaways."""

    _setup_command = False
    """True while the task's start script runs (``LocalSandbox.shell_setup``): what it leaves is not watched."""

    def _shell_ready(self, box: _Box) -> _Shell:
        """A new agent's shell for ``box`` that has answered once, so the first command of the
        episode does not pay bash's start-up."""
        shell = self._start_shell(box)
        try:
            self._send(shell, "true")
            if self._read_sentinel(shell, {shell.nonce}, Capture(0), time.monotonic() + _START_TIMEOUT_S) is None:
                raise BackendTimeoutError(f"the local sandbox's shell did not answer within {_START_TIMEOUT_S:g} s.")
        except BaseException:
            self._end_shell(shell)
            raise
        return shell

    def _start_shell(self, box: _Box) -> _Shell:
        if self.mechanism == "none":
            os.makedirs(self._workdir_in(box), exist_ok=True)
        master, slave = os.openpty()
        slave_name = os.ttyname(slave)
        control_read, control_write = os.pipe()
        try:
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n": output bytes arrive as written
            attrs[3] &= ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            shell = ["/bin/bash", "--noprofile", "--norc", "-i", "-c", _DRIVER, "bash",
                     self._workdir_in(box), self._jobs_file(box), str(control_read)]
            # The terminal is the interactive bash's controlling terminal, so it gets real job
            # control (and reports like the docker shell): unisolated, from the start (_spawn's
            # `tty`); in a sandbox the agent's PID 1 takes it (`setsid --ctty`, below).
            if self.mechanism != "none":
                # The shell is PID 1 of a pid namespace of its own, with its own /proc: the agent
                # sees its shell and what it starts (and run()'s commands, which join it), not
                # the box's holder processes: the view of `docker run IMAGE bash`. Its mount and
                # IPC namespaces are its own too, so what it leaves there ends with it. It leads
                # its own session (as docker's PID 1 bash does; nothing outside claims the
                # terminal): a session leader cannot move to another process group, and a PID 1
                # in a group of another pid of its namespace never finishes dying (the kernel
                # waits for that pid, which the dying PID 1 itself holds): its box would stay
                # on the host, unkillable.
                shell = [tool_path("setsid", "/usr/bin/setsid"), "--ctty", *shell]
                inside = bwrap_agent_argv() if self.mechanism == "bwrap" else None
                if inside is not None:
                    shell = [*inside, *shell]
                else:
                    shell = [tool_path("unshare", "/usr/bin/unshare"), "--pid", "--fork", "--mount-proc", "--ipc",
                             "--kill-child", "--", "/bin/sh", "-c", _AGENT_INIT, "sh", *agent_caps_argv(), *shell]
            proc = self._spawn(self._enter_argv(box, shell, new_shell=True), stdin=slave, stdout=slave, stderr=slave,
                               in_sandbox=True, pass_fds=(control_read,),
                               tty=slave_name if self.mechanism == "none" else None)
        except BaseException:
            os.close(master)
            os.close(control_write)
            raise
        finally:
            os.close(slave)
            os.close(control_read)
        os.set_blocking(master, False)
        return _Shell(proc, os.fdopen(control_write, "wb"), master, os.pidfd_open(proc.pid), slave=slave_name,
                      levels=[Level(proc.pid, "driver")], depth=3 if self.mechanism != "none" else 1)

    # ------------------------------------------------------------------ the agent's shell

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
        self.start()  # the cgroup exists from here on
        oom_kills = self._cgroup.oom_kills() if self._cgroup is not None else -1
        result = self._shell(command, timeout, max_output)
        if oom_kills >= 0 and self._cgroup is not None and self._cgroup.oom_kills() > oom_kills:
            result = add_memory_note(result, self.limits)
        if result.exit_code not in (0, None) and self.mechanism != "none" and not self._multi_user \
                and any(message in result.output for message in _USER_SWITCH_FAILURES):
            result = dataclasses.replace(result, output=result.output + USER_SWITCH_NOTE)
        return result

    def _shell(self, command: str, timeout: float, max_output: int) -> ExecResult:
        box = self._current()
        shell = box.shell
        if shell is None:
            raise self._died_error()
        started = time.monotonic()
        capture = Capture(max_output)
        if shell.pending:
            capture.feed(bytes(shell.pending))
            shell.pending.clear()
        # What was there when the last command was settled: processes forked since by its
        # background jobs count as new too, so a bomb that started slowly is caught later.
        before = shell.settled if shell.settled is not None else self._ns_pids(box)
        try:
            if len(shell.levels) > 1:
                nonce = self._send_tty(shell, command, started + timeout)
            else:
                self._send(shell, command)
                nonce = shell.nonce
        except OSError:  # broken pipe: the shell is gone
            shell.eof = True
            return self._shell_died(box, capture, started, timed_out=False)
        rejected: set[int] = set()
        hit: list[tuple[int, str]] = []
        while True:
            hit.clear()
            status = self._read_sentinel(shell, {nonce, *waiting_nonces(shell.levels)}, capture, started + timeout,
                                         watch=lambda: self._new_shell(box, shell, rejected, hit))
            if status is not None or not hit:
                break
            entered = self._enter_nested(shell, nonce, capture, hit[0], started + timeout)
            if entered is True:  # the new shell took over; the command runs on below it
                self._contain_runaways(box, before, capture)
                shell.settled = self._ns_pids(box)
                return _result(capture, 0, False, started)
            if entered is not None:
                status = entered
                break
            rejected.add(hit[0][0])
        if status is not None:
            self._settle(shell, status)
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
            return _result(capture, status, False, started)
        if shell.eof:
            return self._shell_died(box, capture, started, timed_out=False)
        if len(shell.levels) > 1 and self._stop_nested(box, shell, capture, nonce):
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
            return _result(capture, None, True, started)
        # Timed out: kill what the command started, then let the shell report back.
        self._kill_command_groups(box, shell, before)
        status = self._read_sentinel(shell, {shell.nonce}, capture, time.monotonic() + _SHELL_GRACE_S)
        del shell.levels[1:]
        if status is None:
            if shell.eof:
                return self._shell_died(box, capture, started, timed_out=True)
            self._stop_shell(box)
            self._kill_command_groups(box, shell, before)  # what the loop had started meanwhile
            if not self._box_alive(box):
                raise self._died_error()
            box.shell = self._shell_ready(box)  # answered: its namespaces are whole before a one-off joins them
            capture.note(RESTARTED_NOTE.rstrip("\n"))
        else:
            self._contain_runaways(box, before, capture)
            shell.settled = self._ns_pids(box)
        return _result(capture, None, True, started)

    @staticmethod
    def _discard_pending(shell: _Shell) -> None:
        """Drop output waiting on the terminal (it would open the next command's output)."""
        shell.pending.clear()
        deadline = time.monotonic() + 0.2
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_READ)
            while time.monotonic() < deadline and sel.select(0.02):
                try:
                    if not os.read(shell.fd, _CHUNK):
                        return
                except BlockingIOError:
                    continue
                except OSError:
                    return

    def _ns_pids(self, box: _Box) -> set[int]:
        """The pids of the box's pid namespace, as its own /proc lists them (empty when unisolated)."""
        if self.mechanism == "none" or box.ns_pid is None:
            return set()
        try:
            view = self._agent_init(box) or box.ns_pid
            return {int(entry) for entry in os.listdir(f"/proc/{view}/root/proc") if entry.isdigit()}
        except OSError:
            return set()

    def _contain_runaways(self, box: _Box, before: set[int], capture: Capture) -> None:
        """Kill what the last command left running when it is a flood (``runaway_budget``).

        What the command left (processes of the box's pid namespace not in ``before``) is
        judged by the shared heuristic (:func:`~agentunit_gym.images.os.shell_protocol.is_flood`);
        a flood is killed, every process the command created, in rounds until none is left,
        and the output says so. A box still at its pids limit after that
        (:func:`~agentunit_gym.images.os.shell_protocol.at_pids_limit`) was filled by what an
        earlier command left (a bomb judged still then may fill the limit later): then
        everything but our shells is killed.
        """
        if self.mechanism == "none" or not before or self._setup_command:
            return
        # A fork the pids limit refused since the last look (one-off commands count their own)
        # makes what this command left a flood, whatever the count says.
        seen = self._pids_refused_seen
        refused = (lambda: self._refused_forks() - seen) if seen >= 0 else None
        if not at_pids_limit(len(self._ns_pids(box)), self.pids_limit) and not is_flood(
                lambda: len(self._ns_pids(box) - before), len(before), self.runaway_budget, self.pids_limit,
                throttled=self._throttled_reader(), refused=refused):
            self._pids_refused_seen = self._refused_forks()
            return
        killed = self._kill_flood(box, before)
        if at_pids_limit(len(self._ns_pids(box)), self.pids_limit):
            killed += self._kill_flood(box, self._shell_inner_pids(box))
        capture.note(runaway_note(killed, self.runaway_budget))

    def _kill_flood(self, box: _Box, spare: set[int]) -> int:
        """Kill every process of the agent's namespace whose pid there is not in ``spare``, with
        its group, in rounds until none is left; returns how many were killed."""
        assert box.ns_pid is not None
        try:
            ns = os.stat(f"/proc/{self._agent_init(box) or box.ns_pid}/ns/pid").st_ino
        except OSError:
            return 0
        shell_group = box.shell.sid if box.shell is not None else -1
        # Never a group of ours: nsenter's, the ones below it, the agent's PID 1's (the
        # driver's bash: a command substitution forks in its group), a nested shell's (it
        # leads one). What is in those groups is killed one by one.
        spared_groups = {shell_group, *_children_ints(shell_group), self._agent_init(box) or -1,
                         *(level.pid for level in (box.shell.levels if box.shell is not None else ()))}
        killed: set[int] = set()
        end = time.monotonic() + _KILL_TIMEOUT_S
        while time.monotonic() < end:
            targets = [pid for pid in _pids_in_namespace(ns)
                       if _inner_pid(pid) not in spare and (_proc_stat_fields(pid) or [b"Z"])[0] != b"Z"]
            if not targets:
                break
            for pid in targets:
                st = _read_proc_stat(pid)
                # OSError: the process is exiting (its stat may then show group 0: never signal that,
                # it would mean our own group).
                with contextlib.suppress(OSError):
                    if st is not None and st[0] > 1 and st[0] not in spared_groups:
                        os.killpg(st[0], signal.SIGKILL)  # the whole group at once: it stops forking
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.002)
        if box.shell is not None:  # what the killed processes printed ("fork: retry: ...") is noise now
            self._discard_pending(box.shell)
        self._pids_refused_seen = self._refused_forks()  # the bomb's last forks, refused while it died
        return len(killed)

    def _shell_inner_pids(self, box: _Box) -> set[int]:
        """The agent namespace's pids of our shells: its init (the driver's bash), the nested
        shells and what is between them (``su``)."""
        init = self._agent_init(box)
        kept = {1}
        for level in box.shell.levels[1:] if box.shell is not None else ():
            pid = level.pid
            while pid > 1 and pid != init:
                inner = _inner_pid(pid)
                fields = _proc_stat_fields(pid)
                if inner is None or fields is None or inner in kept:
                    break
                kept.add(inner)
                pid = int(fields[1])
        return kept

    def _clear_full_box(self, box: _Box) -> None:
        """Before a one-off command: a box left at its pids limit by the agent could not run
        it, so the flood is killed first (silently: the command's output is the caller's)."""
        if box.shell is not None and self._cgroup is not None and self.mechanism != "none" \
                and at_pids_limit(len(self._ns_pids(box)), self.pids_limit):
            self._kill_flood(box, self._shell_inner_pids(box))

    def _exec(self, argv: Sequence[str], *, timeout: float, max_output: int,
              capture: Capture | None = None) -> ExecResult:
        """A one-off command (``run()``, the file helpers), after clearing a box the agent left
        full; the forks the pids limit refuses it are its own, not the agent shell's flood."""
        self._clear_full_box(self._current())
        try:
            return super()._exec(argv, timeout=timeout, max_output=max_output, capture=capture)
        finally:
            if self._cgroup is not None:
                self._pids_refused_seen = self._refused_forks()

    def _throttled_reader(self) -> Callable[[], int] | None:
        """The box's count of CPU-throttled periods, when its cgroup limits the CPU."""
        cgroup = self._cgroup
        return cgroup.cpu_throttled if cgroup is not None and cgroup.cpu_throttled() >= 0 else None

    def _refused_forks(self) -> int:
        """Forks the box's pids limit has refused so far (-1: no pids cgroup here)."""
        return self._cgroup.pids_refused() if self._cgroup is not None else -1

    @staticmethod
    def _send(shell: _Shell, command: str) -> None:
        """Send one command to the driver, under a fresh nonce (``shell.nonce``)."""
        shell.nonce = new_nonce()
        shell.stdin.write(shell.nonce.encode() + b"\n" + command.replace("\0", "").encode("utf-8", "surrogateescape")
                          + b"\0")
        shell.stdin.flush()

    def _read_sentinel(self, shell: _Shell, accept: set[str], capture: Capture, deadline: float,
                       watch: Callable[[], bool] | None = None) -> int | None:
        """Read the shell's output into ``capture`` until the sentinel of one of the nonces in
        ``accept`` (it is then ``shell.found``); its exit status, or None (deadline passed; the
        shell exited: then ``shell.eof`` is set; or ``watch``, called when the terminal is
        quiet, returned True). What follows the sentinel waits in ``shell.pending``."""
        capture.expect(accept)
        quiet = 0.02 if watch is not None else None
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_READ)
            # Background jobs may hold the terminal open after the shell is gone, so the
            # shell's end is watched on its pidfd, not on the terminal.
            sel.register(shell.exit_fd, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    capture.finish()
                    return None
                events = sel.select(left if quiet is None else min(left, quiet))
                if not events:
                    if watch is not None and watch():
                        capture.finish()
                        return None
                    continue
                chunk = b""
                with contextlib.suppress(BlockingIOError):
                    try:
                        chunk = os.read(shell.fd, _CHUNK)
                    except OSError:  # EIO: nothing holds the terminal any more
                        chunk = b""
                if not chunk:
                    if any(key.fd == shell.exit_fd for key, _ in events) or shell.proc.poll() is not None:
                        capture.finish()
                        shell.eof = True
                        return None
                    continue
                capture.feed(chunk)
                if capture.found is not None:
                    shell.pending += capture.after
                    shell.found = capture.found_nonce
                    return capture.found

    # ------------------------------------------------------------------ shells that nest

    def _new_shell(self, box: _Box, shell: _Shell, rejected: set[int], hit: list[tuple[int, str]]) -> bool:
        """True (and the shell in ``hit``) when a shell that is not one of ours yet waits at the
        terminal, seen so twice in a row (20 ms apart)."""
        try:
            group = os.tcgetpgrp(shell.fd)
        except OSError:
            return False
        known = {self._agent_init(box), *(level.pid for level in shell.levels), *rejected}
        name = None if group in known else interactive_shell(group)  # a shell leads its own group
        if name is None:
            hit.clear()
            return False
        if hit and hit[0][0] == group:
            return True
        hit[:] = [(group, name)]
        return False

    @staticmethod
    def _send_tty(shell: _Shell, command: str, deadline: float) -> str:
        """Write ``command`` to the terminal for the top nested shell; returns its nonce."""
        nonce = new_nonce()
        data = shell.levels[-1].line(command, nonce).encode("utf-8", "surrogateescape")
        with selectors.DefaultSelector() as sel:
            sel.register(shell.fd, selectors.EVENT_WRITE)
            while data:
                try:
                    data = data[os.write(shell.fd, data):]
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OSError("the terminal does not take input") from None
                    sel.select(0.05)
        return nonce

    @staticmethod
    def _settle(shell: _Shell, status: int) -> None:
        """After a sentinel: if it was a lower shell's line, the shells above it have exited."""
        settle(shell.levels, shell.found, status)

    def _enter_nested(self, shell: _Shell, nonce: str, capture: Capture, hit: tuple[int, str],
                      deadline: float) -> bool | int | None:
        """Make the shell in ``hit`` the top one and set it up: True when it answered, the
        status when the command's own line reported meanwhile, None when it took no commands."""
        capture.drop_partial_line()  # its first prompt
        shell.levels[-1].waiting = nonce
        shell.levels.append(Level(*hit))
        try:
            setup = self._send_tty(shell, SHELL_SETUP, deadline)
        except OSError:
            setup = ""
        status = self._read_sentinel(shell, {setup, *waiting_nonces(shell.levels)} - {""}, Capture(0),
                                     max(time.monotonic() + 1.0, min(time.monotonic() + 5.0, deadline)))
        if status is not None and shell.found == setup:
            return True
        shell.levels.pop()
        shell.levels[-1].waiting = None
        if status is not None and shell.found == nonce:
            return status
        flush_terminal_input(shell.slave)
        return None

    def _stop_nested(self, box: _Box, shell: _Shell, capture: Capture, nonce: str) -> bool:
        """After a timeout in a nested shell: stop what hangs and get a shell that answers.

        The foreground job is killed (the nested shell then reports); a shell busy itself gets
        Ctrl-C (SIGINT) and an empty command; one that still does not answer is killed, and the
        shell below it (whose line started it) reports. False: the driver's shell must be dealt
        with as for any timeout."""
        ours = {self._agent_init(box), *(level.pid for level in shell.levels[1:])}
        with contextlib.suppress(OSError):
            group = os.tcgetpgrp(shell.fd)
            if group not in ours and group > 1:
                os.killpg(group, signal.SIGKILL)
                status = self._read_sentinel(shell, {nonce, *waiting_nonces(shell.levels)}, capture,
                                             time.monotonic() + 0.5)
                if status is not None:
                    self._settle(shell, status)
                    return True
        while len(shell.levels) > 1:
            top = shell.levels[-1]
            for _ in range(3):
                with contextlib.suppress(OSError):
                    group = os.tcgetpgrp(shell.fd)
                    if group not in ours and group > 1:
                        os.killpg(group, signal.SIGINT)
                with contextlib.suppress(OSError):
                    os.kill(top.pid, signal.SIGINT)
                time.sleep(0.05)
                try:
                    resync = self._send_tty(shell, ":", time.monotonic() + 1.0)
                except OSError:
                    break
                if self._read_sentinel(shell, {resync, *waiting_nonces(shell.levels)}, Capture(0),
                                       time.monotonic() + 1.0) is not None:
                    self._settle(shell, 0)
                    return True
            capture.note(NESTED_KILLED_NOTE)
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(top.pid, signal.SIGKILL)
            shell.levels.pop()
            flush_terminal_input(shell.slave)  # the resync lines it never read
            below = shell.levels[-1].waiting
            if below is None:
                return False
            status = self._read_sentinel(shell, {below}, Capture(0), time.monotonic() + 1.0)
            if status is not None:
                self._settle(shell, status)
                return True
        return False

    def _shell_died(self, box: _Box, capture: Capture, started: float, *, timed_out: bool) -> ExecResult:
        shell = box.shell
        assert shell is not None
        try:
            code: int | None = shell.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and self._box_alive(box):
            # The agent ended its shell (``exit 3``, ``exec true``): report its status and give it
            # a new one, as the docker sandbox does (the interactive bash already printed "exit").
            self._stop_shell(box)
            box.shell = self._shell_ready(box)  # answered: its namespaces are whole before a one-off joins them
            capture.note(EXITED_NOTE)
            return _result(capture, None if timed_out else code, timed_out, started)
        self._stop_shell(box)
        raise self._died_error()

    def _kill_command_groups(self, box: _Box, shell: _Shell, before: set[int]) -> None:
        """Kill every process group of the shell's session that is not the shell's own or an
        earlier job: one the shell listed before the command (its jobs file), or one whose
        leader was already running then (``before``: the agent's pids as the command was sent;
        under load the command may time out before the shell has even written its jobs file)."""
        # The agent's PID 1, its bash, leads the session (unisolated: the bash we started;
        # none: the shell is gone, and its pid namespace with it).
        sid = (self._agent_init(box) or -1) if self.mechanism != "none" else shell.sid
        # The interactive bash leads a process group of its own, and so do the processes
        # above it (nsenter, bwrap or unshare): spare them too (unisolated, the bash only:
        # its children are the jobs).
        spared = {sid, *shell.chain()}
        earlier: set[int] = set()
        jobs_file = self._jobs_file(box)
        jobs_host = Path(jobs_file) if self.mechanism == "none" else box.map_writable(jobs_file)
        with contextlib.suppress(OSError, ValueError):
            if jobs_host is not None:
                earlier = {int(x) for x in _read_small_file(jobs_host).split()}
        deadline = time.monotonic() + _KILL_ROUNDS_S
        while time.monotonic() < deadline:
            groups = set()
            for pid, (pgrp, session) in _scan_processes():
                if session != sid or pgrp in spared or pgrp <= 1:  # 0: an exiting process
                    continue
                ns_pgid = _ns_pgid(pid) if self.mechanism != "none" else pgrp
                if ns_pgid not in earlier and ns_pgid not in before:
                    groups.add(pgrp)
            if not groups:
                return
            for pgrp in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgrp, signal.SIGKILL)
            time.sleep(0.005)  # a fork bomb may still be forking: look again


