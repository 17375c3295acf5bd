"""The shell driver shared by the docker supervisor and the local sandbox (images/os/shell_driver.py).

A scripted terminal (:class:`FakeTerminal`) plays the shells so the state machine's decisions
are checked exactly, in both transport shapes (an outermost shell that reads the terminal, as
in the container; one fed by a pipe, as the local driver loop); then one transcript runs
through the real docker and local sandboxes, and what each reports must be the same.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from agentunit_gym.backends.sandbox.base import ExecResult, Sandbox
from agentunit_gym.images.os import shell_driver
from agentunit_gym.images.os.shell_driver import Report, ShellDriver
from agentunit_gym.images.os.shell_protocol import (
    EXITED_NOTE,
    NESTED_KILLED_NOTE,
    RESTARTED_NOTE,
    SHELL_SETUP,
    Level,
    runaway_note,
)
from tests.backends.sandbox_conformance import make_sandbox

_NONCE = re.compile(r"AU([0-9a-f]{16}):")


def _unquote(line: str) -> str:
    """The command inside a :meth:`Level.line` (``eval $'...'`` for bash, ``eval '...'`` for sh)."""
    line = re.sub(r"^\(exit \d+\); ", "", line)
    if line.startswith("eval $'"):
        out, i = [], len("eval $'")
        while line[i] != "'":
            if line[i] == "\\":
                if line[i + 1] == "x":
                    out.append(chr(int(line[i + 2:i + 4], 16)))
                    i += 4
                    continue
                out.append(line[i + 1])
                i += 2
                continue
            out.append(line[i])
            i += 1
        return "".join(out)
    body = line[len("eval '"):line.index("'; command printf")]
    return body.replace("'\\''", "'")


def _sentinel(nonce: str, status: int) -> bytes:
    return b"\x1eAU" + nonce.encode() + b":" + str(status).encode() + b"\x1e"


@dataclass
class FakeShell:
    pid: int
    name: str
    waiting: str | None = None
    """The nonce of its line that started the shell above it."""
    busy: str | None = None
    """What keeps it from reading: "loop" (Ctrl-C ends it), "loop-noint" (only SIGKILL ends it)."""
    line_nonce: str = ""


@dataclass
class FakeTerminal:
    """Plays a stack of shells on a terminal for a :class:`ShellDriver` (a :class:`Transport`).

    Commands: ``echo X``, ``fail N`` (status N), ``bash``/``sh`` (a new shell takes the terminal),
    ``exit N``, ``sleep`` (a foreground job until killed), ``loop`` (a loop of builtins: Ctrl-C
    ends it), ``loop-noint`` (ignores Ctrl-C), ``notashell`` (looks like a shell at the terminal,
    reads nothing), ``bash-and-leave`` (a new shell that exits, with the shell that started it,
    once it reads a line: the line below those reports 7), ``bomb`` (leaves a flood of 40).
    """

    outer_reads_terminal: bool
    grace_s: float = 0.3
    runaway_budget: int = 32
    shells: list[FakeShell] = field(default_factory=lambda: [FakeShell(100, "bash")])
    out: bytearray = field(default_factory=bytearray)
    job: tuple[int, str] | None = None
    """The foreground job (pid, the nonce of the line that started it)."""
    impostor: int | None = None
    unread: list[bytes] = field(default_factory=list)
    gone: bool = False
    log: list[tuple[object, ...]] = field(default_factory=list)
    flood: int = 0
    next_pid: int = 200
    exit_code: int | None = None

    # -- the transport

    @property
    def pipe(self) -> FakeTerminal | None:
        return None if self.outer_reads_terminal else self

    def send(self, command: str, nonce: str) -> None:
        assert not self.outer_reads_terminal and len(self.shells) == 1
        self._run(self.shells[0], command, nonce)

    def write_terminal(self, data: bytes, deadline: float) -> None:
        self.unread.append(data)
        self._feed()

    def read(self, wait: float) -> bytes | None:
        if self.out:
            data, self.out[:] = bytes(self.out), b""
            return data
        return b"" if self.gone else None

    def foreground_group(self) -> int | None:
        if self.job is not None:
            return self.job[0]
        return self.impostor if self.impostor is not None else self.shells[-1].pid

    def ours(self) -> set[int]:
        return set()

    def kill(self, pid: int, sig: int, *, group: bool) -> None:
        self.log.append(("kill", pid, signal.Signals(sig).name, group))
        top = self.shells[-1]
        if self.job is not None and pid == self.job[0] and sig == signal.SIGKILL:
            self.job = None
            self._report(top, 137)
        elif self.impostor == pid and sig == signal.SIGKILL:
            self.impostor = None
            self._report(top, 137)
        elif pid == top.pid and sig == signal.SIGINT and top.busy == "loop":
            top.busy = None  # abandons its line: no sentinel
            self._feed()
        elif pid == top.pid and sig == signal.SIGKILL and len(self.shells) > 1:
            self.shells.pop()
            self._report(self.shells[-1], 137, waiting=True)

    def flush_input(self) -> None:
        self.log.append(("flush",))
        self.unread.clear()

    def stop(self, before: set[int]) -> None:
        self.log.append(("stop_outer",))
        for pid in (self.job[0] if self.job is not None else None, self.impostor):
            if pid is not None:
                self.kill(pid, signal.SIGKILL, group=True)

    def processes(self) -> set[int]:
        return {1}

    def contain_runaways(self, before: set[int], levels: list[Level]) -> int:
        killed, self.flood = self.flood, 0
        return killed

    def exit_status(self) -> int | None:
        return self.exit_code

    # -- the shells

    def _feed(self) -> None:
        while self.unread and self.job is None and self.impostor is None and self.shells[-1].busy is None:
            line = self.unread.pop(0).decode()
            self._run(self.shells[-1], _unquote(line), _NONCE.findall(line)[-1])

    def _report(self, shell: FakeShell, status: int, *, waiting: bool = False) -> None:
        nonce = shell.waiting if waiting else shell.line_nonce
        assert nonce is not None
        if waiting:
            shell.waiting = None
        self.out += _sentinel(nonce, status)

    def _new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def _run(self, shell: FakeShell, command: str, nonce: str) -> None:
        self.log.append(("line", shell.name, command))
        shell.line_nonce = nonce
        word, _, arg = command.partition(" ")
        if word == "echo":
            self.out += arg.encode() + b"\n"
            self._report(shell, 0)
        elif word == "fail":
            self._report(shell, int(arg))
        elif command in (":", SHELL_SETUP):
            self._report(shell, 0)
        elif word in ("bash", "sh", "bash-and-leave"):
            shell.waiting = nonce
            self.shells.append(FakeShell(self._new_pid(), "leave" if word == "bash-and-leave" else word))
            self.out += b"$ "  # its first prompt
        elif word == "exit":
            if len(self.shells) == 1:
                self.gone, self.exit_code = True, int(arg or 0)
                return
            self.shells.pop()
            self._report(self.shells[-1], int(arg or 0), waiting=True)
        elif word == "sleep":
            self.job = (self._new_pid(), nonce)
        elif word in ("loop", "loop-noint"):
            shell.busy = word
        elif word == "notashell":
            self.impostor = self._new_pid()
        elif word == "bomb":
            self.flood = 40
            self._report(shell, 0)
        else:
            raise AssertionError(f"the fake shell does not know {command!r}")
        if shell.name == "leave" and command == SHELL_SETUP:
            # It and the shell that started it exit: the line below both reports.
            self.out[:] = b""
            self.shells[-2:] = []
            self._report(self.shells[-1], 7, waiting=True)


@pytest.fixture(autouse=True)
def _fake_shells_at_the_terminal(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("docker") is not None:
        return  # real shells: the driver as shipped
    # The driver asks /proc whether the foreground group is an idle shell; the fake answers.
    monkeypatch.setattr(shell_driver, "interactive_shell", lambda pid: "bash" if pid >= 200 else None)
    # A scripted shell answers at once or never: short waits for what never comes.
    monkeypatch.setattr(shell_driver, "RESYNC_S", 0.1)
    monkeypatch.setattr(shell_driver, "SETUP_S", (0.1, 0.5))


def _driver(outer_reads_terminal: bool) -> tuple[ShellDriver, FakeTerminal]:
    terminal = FakeTerminal(outer_reads_terminal)
    return ShellDriver(terminal, Level(100, "bash" if outer_reads_terminal else "driver")), terminal


def _said(report: Report) -> tuple[str, int | None, bool, str | None]:
    return report.capture.text(), report.exit_code, report.timed_out, report.ended


BOTH = pytest.mark.parametrize("outer_reads_terminal", [True, False], ids=["docker-shaped", "local-shaped"])


@BOTH
def test_nested_shells_take_the_terminal_until_they_exit(outer_reads_terminal: bool) -> None:
    driver, terminal = _driver(outer_reads_terminal)
    assert _said(driver.run("echo hi", 5, 100)) == ("hi\n", 0, False, None)
    assert _said(driver.run("bash", 5, 100)) == ("", 0, False, None)  # its prompt dropped
    assert [level.pid for level in driver.levels] == [100, 201]
    assert _said(driver.run("fail 5", 5, 100)) == ("", 5, False, None)
    assert driver.levels[-1].status == 5  # the next line sets $? back first
    assert _said(driver.run("sh", 5, 100)) == ("", 0, False, None)
    assert _said(driver.run("exit 4", 5, 100)) == ("", 4, False, None)  # back in bash: sh's status
    assert len(driver.levels) == 2
    assert _said(driver.run("exit 3", 5, 100)) == ("", 3, False, None)
    assert len(driver.levels) == 1 and driver.levels[0].waiting is None
    # Lines reached the shells that read the terminal; the outermost one by its own way.
    assert [entry for entry in terminal.log if entry[0] == "line" and entry[2] != SHELL_SETUP] == [
        ("line", "bash", "echo hi"), ("line", "bash", "bash"), ("line", "bash", "fail 5"),
        ("line", "bash", "sh"), ("line", "sh", "exit 4"), ("line", "bash", "exit 3")]


@BOTH
def test_a_lower_line_reporting_while_a_new_shell_is_set_up_drops_every_level_above_it(
        outer_reads_terminal: bool) -> None:
    # The drift the two copies had: the supervisor popped down to the command's level, the local
    # sandbox popped one, and both then lost the lower sentinel (the command waited for its
    # timeout). The shells above the line that reported have exited, whichever level it is.
    driver, _ = _driver(outer_reads_terminal)
    driver.run("bash", 5, 100)
    report = driver.run("bash-and-leave", 5, 100)
    assert _said(report) == ("", 7, False, None)
    assert [(level.pid, level.waiting, level.status) for level in driver.levels] == [(100, None, 7)]
    assert _said(driver.run("echo outer", 5, 100)) == ("outer\n", 0, False, None)


@BOTH
def test_a_timeout_in_a_nested_shell_kills_the_job_and_keeps_the_shell(outer_reads_terminal: bool) -> None:
    driver, terminal = _driver(outer_reads_terminal)
    driver.run("sh", 5, 100)
    assert _said(driver.run("sleep", 0.2, 100)) == ("", None, True, None)
    assert ("kill", 202, "SIGKILL", True) in terminal.log and len(driver.levels) == 2
    assert driver.levels[-1].status == 137
    assert _said(driver.run("echo still", 5, 100)) == ("still\n", 0, False, None)


@BOTH
def test_a_busy_nested_shell_gets_ctrl_c_then_a_resync_line(outer_reads_terminal: bool) -> None:
    driver, terminal = _driver(outer_reads_terminal)
    driver.run("bash", 5, 100)
    assert _said(driver.run("loop", 0.2, 100)) == ("", None, True, None)
    assert ("kill", 201, "SIGINT", False) in terminal.log and len(driver.levels) == 2
    assert _said(driver.run("echo in-step", 5, 100)) == ("in-step\n", 0, False, None)


@BOTH
def test_a_nested_shell_that_ignores_ctrl_c_is_ended(outer_reads_terminal: bool) -> None:
    driver, terminal = _driver(outer_reads_terminal)
    driver.run("bash", 5, 100)
    report = driver.run("loop-noint", 0.2, 100)
    assert _said(report) == (NESTED_KILLED_NOTE, None, True, None)
    kills = [entry for entry in terminal.log if entry[0] == "kill"]
    assert kills == [("kill", 201, "SIGINT", False)] * 3 + [("kill", 201, "SIGKILL", True),
                                                          ("kill", 201, "SIGKILL", False)]
    assert ("flush",) in terminal.log  # the resync lines it never read
    assert len(driver.levels) == 1 and driver.levels[0].status == 137
    assert _said(driver.run("echo back", 5, 100)) == ("back\n", 0, False, None)


@BOTH
def test_something_that_looks_like_a_shell_but_reads_nothing_is_a_job(outer_reads_terminal: bool) -> None:
    driver, terminal = _driver(outer_reads_terminal)
    report = driver.run("notashell", 0.5, 100)
    assert _said(report) == ("", None, True, None)
    assert len(driver.levels) == 1 and ("flush",) in terminal.log  # our set-up line was dropped
    assert ("kill", 201, "SIGKILL", True) in terminal.log


@BOTH
def test_the_agent_ending_its_outermost_shell_asks_for_a_new_one(outer_reads_terminal: bool) -> None:
    driver, _ = _driver(outer_reads_terminal)
    report = driver.run("exit 6", 5, 100)
    assert _said(report) == (EXITED_NOTE, 6, False, "exited") and report.shell_exit == 6


def test_a_stuck_outermost_shell_is_resynced_on_a_terminal_and_replaced_behind_a_pipe() -> None:
    # Docker's outer bash reads the terminal: Ctrl-C ends its loop, and it answers again. The
    # local driver loop does not: what the command started is killed, then it is replaced.
    docker_like, _ = _driver(True)
    assert _said(docker_like.run("loop", 0.2, 100)) == ("", None, True, None)
    local_like, terminal = _driver(False)
    report = local_like.run("loop", 0.2, 100)
    assert _said(report) == (RESTARTED_NOTE, None, True, "stuck")
    assert ("stop_outer",) in terminal.log


@BOTH
def test_a_flood_is_noted_and_output_is_capped(outer_reads_terminal: bool) -> None:
    driver, _ = _driver(outer_reads_terminal)
    report = driver.run("bomb", 5, 1000)
    assert _said(report) == (runaway_note(40, 32), 0, False, None)
    capped = driver.run("echo " + "x" * 50, 5, 10)
    assert (capped.capture.text(), capped.capture.total, capped.capture.truncated) == ("x" * 10, 51, True)


# ---------------------------------------------------------------- the real sandboxes

TRANSCRIPT: tuple[tuple[str, float, int], ...] = (
    ("cd /tmp && X=outer", 10, 1 << 16),
    ("echo $X; false", 10, 1 << 16),
    ("echo $?", 10, 1 << 16),
    ("bash", 10, 1 << 16),
    ('echo "in bash [$X]"; (exit 5)', 10, 1 << 16),
    ("echo $?; Y=inner", 10, 1 << 16),
    ("sh", 10, 1 << 16),
    ('echo "$0 $Y"; pwd', 10, 1 << 16),
    ("sleep 100", 1.0, 1 << 16),
    ("echo alive in sh", 10, 1 << 16),
    ("trap '' INT; while :; do :; done", 1.0, 1 << 16),
    ('echo "back in bash $Y"', 10, 1 << 16),
    ("head -c 300000 /dev/zero | tr '\\0' a", 10, 1000),
    ("for i in $(seq 40); do sleep 100 & done", 10, 1 << 16),
    ("exit 3", 10, 1 << 16),
    ('echo "$X"; pwd', 10, 1 << 16),
    ("sleep 100 & sleep 101 & echo two jobs", 10, 1 << 16),
    ("cat", 1.0, 1 << 16),
    ("exit 9", 10, 1 << 16),
    ('echo "[${X-}]"', 10, 1 << 16),
)
"""Nested shells, a timeout in one, one that ignores Ctrl-C, output past the cap, a flood, an
exit from the outermost shell: what the agent reads must not depend on the sandbox."""


def _seen(result: ExecResult) -> tuple[str, int | None, bool, bool, int]:
    output = re.sub(r"^\[\d+\].*\n", "", result.output, flags=re.MULTILINE)  # job notices: pids differ
    return output, result.exit_code, result.timed_out, result.truncated, result.output_bytes


@pytest.fixture
def sandboxes() -> Iterator[dict[str, Sandbox]]:
    made = {kind: make_sandbox(kind) for kind in ("docker", "local")}
    try:
        for sandbox in made.values():
            sandbox.start()
        yield made
    finally:
        for sandbox in made.values():
            sandbox.close()


@pytest.mark.docker
@pytest.mark.slow
def test_one_transcript_reads_the_same_in_docker_and_local(sandboxes: dict[str, Sandbox]) -> None:
    seen = {kind: [_seen(sandbox.shell(command, timeout=timeout, max_output=cap))
                   for command, timeout, cap in TRANSCRIPT]
            for kind, sandbox in sandboxes.items()}
    assert seen["docker"] == seen["local"]
    # And what both read is what the transcript means.
    by_command = dict(zip((command for command, _, _ in TRANSCRIPT), seen["local"], strict=True))
    assert by_command["echo $?"][:2] == ("1\n", 0)
    assert by_command['echo "in bash [$X]"; (exit 5)'][:2] == ("in bash []\n", 5)
    assert by_command["sleep 100"][1:3] == (None, True)
    assert by_command["trap '' INT; while :; do :; done"][0] == NESTED_KILLED_NOTE
    assert by_command['echo "back in bash $Y"'][0] == "back in bash inner\n"
    assert by_command["head -c 300000 /dev/zero | tr '\\0' a"][2:] == (False, True, 300000)
    assert by_command["for i in $(seq 40); do sleep 100 & done"][0] == runaway_note(40, 32)
    assert by_command["exit 3"][1] == 3
    assert by_command['echo "$X"; pwd'][0] == "outer\n/tmp\n"
    assert by_command["exit 9"][0].endswith(EXITED_NOTE) and by_command["exit 9"][1] == 9
    assert by_command['echo "[${X-}]"'][0] == "[]\n"
