"""The agent's persistent shell: the driver, the sentinels, shells that nest, timeouts and
what a command left running."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import select
import signal
import subprocess
import termios
import time
from collections.abc import Callable
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
    _Boxes,
    _result,
    _Shell,
    died_error,
)
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
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.images.os.shell_driver import ShellDriver
from agentunit_gym.images.os.shell_protocol import (
    Level,
    at_pids_limit,
    flush_terminal_input,
    is_flood,
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


class _AgentShell:
    """The agent's persistent shell in a box: starting it, its commands (through the shared
    :class:`~agentunit_gym.images.os.shell_driver.ShellDriver`, on a :class:`_LocalTerminal`),
    replacing it, and what its commands left running."""

    def __init__(self, setup: _Setup, boxes: _Boxes) -> None:
        self.setup, self.boxes = setup, boxes

    def shell_ready(self, box: _Box) -> _Shell:
        """A new agent's shell for ``box`` that has answered once, so the first command of the
        episode does not pay bash's start-up."""
        shell = self._start_shell(box)
        try:
            if shell.driver.roundtrip("true", _START_TIMEOUT_S) is None:
                raise BackendTimeoutError(f"the local sandbox's shell did not answer within {_START_TIMEOUT_S:g} s.")
        except BaseException:
            self.boxes.end_shell(shell)
            raise
        return shell

    def _start_shell(self, box: _Box) -> _Shell:
        if self.setup.mechanism == "none":
            os.makedirs(self.boxes.workdir_in(box), exist_ok=True)
        master, slave = os.openpty()
        slave_name = os.ttyname(slave)
        control_read, control_write = os.pipe()
        try:
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.OPOST  # no "\n" -> "\r\n": output bytes arrive as written
            attrs[3] &= ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            shell = ["/bin/bash", "--noprofile", "--norc", "-i", "-c", _DRIVER, "bash",
                     self.boxes.workdir_in(box), self.boxes.jobs_file(box), str(control_read)]
            # The terminal is the interactive bash's controlling terminal, so it gets real job
            # control (and reports like the docker shell): unisolated, from the start (_spawn's
            # `tty`); in a sandbox the agent's PID 1 takes it (`setsid --ctty`, below).
            if self.setup.mechanism != "none":
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
                inside = bwrap_agent_argv() if self.setup.mechanism == "bwrap" else None
                if inside is not None:
                    shell = [*inside, *shell]
                else:
                    shell = [tool_path("unshare", "/usr/bin/unshare"), "--pid", "--fork", "--mount-proc", "--ipc",
                             "--kill-child", "--", "/bin/sh", "-c", _AGENT_INIT, "sh", *agent_caps_argv(), *shell]
            proc = self.boxes.spawn(self.boxes.enter_argv(box, shell, new_shell=True), stdin=slave, stdout=slave,
                                    stderr=slave, in_sandbox=True, pass_fds=(control_read,),
                                    tty=slave_name if self.setup.mechanism == "none" else None)
        except BaseException:
            os.close(master)
            os.close(control_write)
            raise
        finally:
            os.close(slave)
            os.close(control_read)
        os.set_blocking(master, False)
        made = _Shell(proc, os.fdopen(control_write, "wb"), master, os.pidfd_open(proc.pid), slave=slave_name,
                      depth=3 if self.setup.mechanism != "none" else 1)
        made.driver = ShellDriver(_LocalTerminal(self, box, made), Level(proc.pid, "driver"))
        return made

    # ------------------------------------------------------------------ the agent's shell

    def shell(self, box: _Box, command: str, *, timeout: float, max_output: int, watch: bool = True) -> ExecResult:
        """Run ``command`` in the agent's persistent bash (see :meth:`LocalSandbox.shell`), with
        the notes of the memory limit and of a user switch this sandbox cannot make."""
        cgroup = self.setup.cgroup
        oom_kills = cgroup.oom_kills() if cgroup is not None else -1
        result = self._shell(box, command, timeout, max_output, watch)
        if oom_kills >= 0 and cgroup is not None and cgroup.oom_kills() > oom_kills:
            result = add_memory_note(result, self.setup.limits)
        if result.exit_code not in (0, None) and self.setup.mechanism != "none" and not self.setup.multi_user \
                and any(message in result.output for message in _USER_SWITCH_FAILURES):
            result = dataclasses.replace(result, output=result.output + USER_SWITCH_NOTE)
        return result

    def _shell(self, box: _Box, command: str, timeout: float, max_output: int, watch: bool = True) -> ExecResult:
        shell = box.shell
        if shell is None:
            raise died_error()
        started = time.monotonic()
        report = shell.driver.run(command, timeout, max_output, watch=watch)
        if not watch and self.setup.mechanism != "none":
            # Forks refused while the task's start script ran are not the agent's next command's.
            self.setup.pids_refused_seen = self.refused_forks()
        if report.ended is not None:
            # The agent ended its shell (``exit 3``, ``exec true``: the driver reports its status),
            # or it is stuck: a new one, as the docker sandbox does, if the box lives on.
            alive = report.ended == "stuck" or report.shell_exit is not None
            self.boxes.stop_shell(box)
            if report.ended == "stuck":
                self._kill_command_groups(box, shell, set(report.before))  # what the loop had started meanwhile
            if not alive or not self.boxes.box_alive(box):
                raise died_error()
            box.shell = self.shell_ready(box)  # answered: its namespaces are whole before a one-off joins them
        return _result(report.capture, report.exit_code, report.timed_out, started)

    def _ns_pids(self, box: _Box) -> set[int]:
        """The pids of the box's pid namespace, as its own /proc lists them (empty when unisolated)."""
        if self.setup.mechanism == "none" or box.ns_pid is None:
            return set()
        try:
            view = self.boxes.agent_init(box) or box.ns_pid
            return {int(entry) for entry in os.listdir(f"/proc/{view}/root/proc") if entry.isdigit()}
        except OSError:
            return set()

    def _contain_runaways(self, box: _Box, before: set[int]) -> int:
        """Kill what the last command left running when it is a flood (``runaway_budget``);
        returns how many processes were killed.

        What the command left (processes of the box's pid namespace not in ``before``) is
        judged by the shared heuristic (:func:`~agentunit_gym.images.os.shell_protocol.is_flood`);
        a flood is killed, every process the command created, in rounds until none is left,
        and the output says so. A box still at its pids limit after that
        (:func:`~agentunit_gym.images.os.shell_protocol.at_pids_limit`) was filled by what an
        earlier command left (a bomb judged still then may fill the limit later): then
        everything but our shells is killed.
        """
        if self.setup.mechanism == "none" or not before:
            return 0
        # A fork the pids limit refused since the last look (one-off commands count their own)
        # makes what this command left a flood, whatever the count says.
        seen = self.setup.pids_refused_seen
        refused = (lambda: self.refused_forks() - seen) if seen >= 0 else None
        if not at_pids_limit(len(self._ns_pids(box)), self.setup.pids_limit) and not is_flood(
                lambda: len(self._ns_pids(box) - before), len(before), self.setup.runaway_budget, self.setup.pids_limit,
                throttled=self._throttled_reader(), refused=refused):
            self.setup.pids_refused_seen = self.refused_forks()
            return 0
        killed = self._kill_flood(box, before)
        if at_pids_limit(len(self._ns_pids(box)), self.setup.pids_limit):
            killed += self._kill_flood(box, self._shell_inner_pids(box))
        return killed

    def _kill_flood(self, box: _Box, spare: set[int]) -> int:
        """Kill every process of the agent's namespace whose pid there is not in ``spare``, with
        its group, in rounds until none is left; returns how many were killed."""
        assert box.ns_pid is not None
        try:
            ns = os.stat(f"/proc/{self.boxes.agent_init(box) or box.ns_pid}/ns/pid").st_ino
        except OSError:
            return 0
        shell_group = box.shell.sid if box.shell is not None else -1
        # Never a group of ours: nsenter's, the ones below it, the agent's PID 1's (the
        # driver's bash: a command substitution forks in its group), a nested shell's (it
        # leads one). What is in those groups is killed one by one.
        spared_groups = {shell_group, *_children_ints(shell_group), self.boxes.agent_init(box) or -1,
                         *(level.pid for level in (box.shell.driver.levels if box.shell is not None else ()))}
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
            box.shell.driver.discard_pending()
        self.setup.pids_refused_seen = self.refused_forks()  # the bomb's last forks, refused while it died
        return len(killed)

    def _shell_inner_pids(self, box: _Box) -> set[int]:
        """The agent namespace's pids of our shells: its init (the driver's bash), the nested
        shells and what is between them (``su``)."""
        init = self.boxes.agent_init(box)
        kept = {1}
        for level in box.shell.driver.levels[1:] if box.shell is not None else ():
            pid = level.pid
            while pid > 1 and pid != init:
                inner = _inner_pid(pid)
                fields = _proc_stat_fields(pid)
                if inner is None or fields is None or inner in kept:
                    break
                kept.add(inner)
                pid = int(fields[1])
        return kept

    def clear_full_box(self, box: _Box) -> None:
        """Before a one-off command: a box left at its pids limit by the agent could not run
        it, so the flood is killed first (silently: the command's output is the caller's)."""
        if box.shell is not None and self.setup.cgroup is not None and self.setup.mechanism != "none" \
                and at_pids_limit(len(self._ns_pids(box)), self.setup.pids_limit):
            self._kill_flood(box, self._shell_inner_pids(box))

    def _throttled_reader(self) -> Callable[[], int] | None:
        """The box's count of CPU-throttled periods, when its cgroup limits the CPU."""
        cgroup = self.setup.cgroup
        return cgroup.cpu_throttled if cgroup is not None and cgroup.cpu_throttled() >= 0 else None

    def refused_forks(self) -> int:
        """Forks the box's pids limit has refused so far (-1: no pids cgroup here)."""
        return self.setup.cgroup.pids_refused() if self.setup.cgroup is not None else -1

    def _kill_command_groups(self, box: _Box, shell: _Shell, before: set[int]) -> None:
        """Kill every process group of the shell's session that is not the shell's own or an
        earlier job: one the shell listed before the command (its jobs file), or one whose
        leader was already running then (``before``: the agent's pids as the command was sent;
        under load the command may time out before the shell has even written its jobs file)."""
        # The agent's PID 1, its bash, leads the session (unisolated: the bash we started;
        # none: the shell is gone, and its pid namespace with it).
        sid = (self.boxes.agent_init(box) or -1) if self.setup.mechanism != "none" else shell.sid
        # The interactive bash leads a process group of its own, and so do the processes
        # above it (nsenter, bwrap or unshare): spare them too (unisolated, the bash only:
        # its children are the jobs).
        spared = {sid, *shell.chain()}
        earlier: set[int] = set()
        jobs_file = self.boxes.jobs_file(box)
        jobs_host = Path(jobs_file) if self.setup.mechanism == "none" else box.map_writable(jobs_file)
        with contextlib.suppress(OSError, ValueError):
            if jobs_host is not None:
                earlier = {int(x) for x in _read_small_file(jobs_host).split()}
        deadline = time.monotonic() + _KILL_ROUNDS_S
        while time.monotonic() < deadline:
            groups = set()
            for pid, (pgrp, session) in _scan_processes():
                if session != sid or pgrp in spared or pgrp <= 1:  # 0: an exiting process
                    continue
                ns_pgid = _ns_pgid(pid) if self.setup.mechanism != "none" else pgrp
                if ns_pgid not in earlier and ns_pgid not in before:
                    groups.add(pgrp)
            if not groups:
                return
            for pgrp in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgrp, signal.SIGKILL)
            time.sleep(0.005)  # a fork bomb may still be forking: look again




class _LocalTerminal:
    """How the shared :class:`~agentunit_gym.images.os.shell_driver.ShellDriver` reaches one
    local shell: commands for the outermost shell go to the driver loop's pipe (``_DRIVER``),
    lines for nested shells to the terminal; processes are the box's pid namespace."""

    grace_s = _SHELL_GRACE_S

    def __init__(self, shells: _AgentShell, box: _Box, shell: _Shell) -> None:
        self.shells, self.box, self.shell = shells, box, shell
        self.runaway_budget = shells.setup.runaway_budget
        self.pipe: _LocalTerminal | None = self  # its own OuterPipe: the driver loop's pipe

    def send(self, command: str, nonce: str) -> None:
        self.shell.stdin.write(nonce.encode() + b"\n" + command.replace("\0", "").encode("utf-8", "surrogateescape")
                               + b"\0")
        self.shell.stdin.flush()

    def write_terminal(self, data: bytes, deadline: float) -> None:
        poller = select.poll()
        poller.register(self.shell.fd, select.POLLOUT)
        while data:
            try:
                data = data[os.write(self.shell.fd, data):]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError("the terminal does not take input") from None
                poller.poll(50)

    def read(self, wait: float) -> bytes | None:
        shell = self.shell
        poller = select.poll()
        # Background jobs may hold the terminal open after the shell is gone, so the shell's
        # end is watched on its pidfd, not on the terminal.
        poller.register(shell.fd, select.POLLIN)
        poller.register(shell.exit_fd, select.POLLIN)
        events = poller.poll(max(0, math.ceil(wait * 1000)))
        if not events:
            return None
        chunk = b""
        with contextlib.suppress(BlockingIOError):
            try:
                chunk = os.read(shell.fd, _CHUNK)
            except OSError:  # EIO: nothing holds the terminal any more
                chunk = b""
        if chunk:
            return chunk
        if any(fd == shell.exit_fd for fd, _ in events) or shell.proc.poll() is not None:
            shell.eof = True
            return b""
        return None

    def foreground_group(self) -> int | None:
        try:
            return os.tcgetpgrp(self.shell.fd)
        except OSError:
            return None

    def ours(self) -> set[int]:
        init = self.shells.boxes.agent_init(self.box)
        return set() if init is None else {init}

    def kill(self, pid: int, sig: int, *, group: bool) -> None:
        with contextlib.suppress(OSError):
            (os.killpg if group else os.kill)(pid, sig)

    def flush_input(self) -> None:
        flush_terminal_input(self.shell.slave)

    def stop(self, before: set[int]) -> None:
        self.shells._kill_command_groups(self.box, self.shell, before)

    def processes(self) -> set[int]:
        return self.shells._ns_pids(self.box)

    def contain_runaways(self, before: set[int], levels: list[Level]) -> int:
        return self.shells._contain_runaways(self.box, before)

    def exit_status(self) -> int | None:
        try:
            return self.shell.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None
