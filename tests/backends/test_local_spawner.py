"""The local sandbox's one-off spawner (backends/sandbox/local/spawner.py): a one-off it starts
is the same process as one the exec chain starts, the agent cannot reach it, and when it is
gone the sandbox goes on through the chain."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sandbox.base import AGENT_CAPABILITIES, ExecResult
from agentunit_gym.backends.sandbox.local import LocalSandbox, cgroup
from agentunit_gym.backends.sandbox.local.procfs import _children_ints
from agentunit_gym.backends.sandbox.local.spawner import CAPABILITY_NUMBERS, Spawner
from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.images.os.shell_protocol import EXITED_NOTE
from tests.backends.test_local_sandbox import no_cgroup_here
from tests.waiting import wait_until

MECHANISMS = [pytest.param("bwrap", id="bwrap"), pytest.param("unshare", id="unshare")]

# Everything of a process that the way it was started decides: identity, capabilities,
# privileges, namespaces (as the agent's shell sees them), cgroup, limits, signals, umask,
# environment, workdir, session (outside the agent's namespace), file descriptors.
IDENTITY = r"""
id; pwd; umask
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|SigBlk|SigIgn):' /proc/self/status
cat /proc/self/oom_score_adj /proc/self/cgroup
for ns in pid mnt ipc uts net user; do echo "$ns $(readlink /proc/self/ns/$ns)"; done
grep -vE '^Max pending signals' /proc/self/limits
env | sort
ls /proc/self/fd
ps -o sid= -p $$
"""


@pytest.fixture(params=MECHANISMS)
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[LocalSandbox, LocalSandbox]]:
    with LocalSandbox(isolation=request.param, warm_spare=False) as spawned, \
            LocalSandbox(isolation=request.param, warm_spare=False, spawner=False) as chained:
        yield spawned, chained


@pytest.fixture(params=["cgroup", "no-cgroup"])
def limits_pair(request: pytest.FixtureRequest, pair: tuple[LocalSandbox, LocalSandbox],
                monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LocalSandbox, LocalSandbox]]:
    """``pair``, or a pair on a host that gives no cgroup (RLIMIT_NPROC, no OOM score raised)."""
    if request.param == "cgroup":
        yield pair
        return
    monkeypatch.setattr(cgroup, "find_hierarchies", no_cgroup_here)
    mechanism = pair[0].mechanism
    with LocalSandbox(isolation=mechanism, warm_spare=False) as spawned, \
            LocalSandbox(isolation=mechanism, warm_spare=False, spawner=False) as chained:  # type: ignore[arg-type]
        assert spawned.box_info().process_limit == "rlimit"  # type: ignore[union-attr]
        yield spawned, chained


def _spawner_pid(sb: LocalSandbox) -> int:
    """The host pid of ``sb``'s spawner (it must have one)."""
    info = sb.box_info()
    assert info is not None and info.spawner_pid is not None
    return info.spawner_pid


def _namespaces_of_the_agent(sb: LocalSandbox) -> str:
    return sb.shell("for ns in pid mnt ipc uts net user; do echo \"$ns $(readlink /proc/$$/ns/$ns)\"; done").output


def test_a_one_off_is_the_same_process_through_the_spawner_as_through_the_exec_chain(
        limits_pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    spawned, chained = limits_pair
    seen = []
    for sb in limits_pair:
        agent_ns = _namespaces_of_the_agent(sb)
        result = sb.run(IDENTITY)
        assert result.exit_code == 0, result
        # In the agent's namespaces, each a namespace of the agent's shell.
        lines = result.output.splitlines()
        assert "\n".join(line for line in lines if re.match(r"(pid|mnt|ipc|uts|net|user) \w+:\[", line)) + "\n" \
            == agent_ns
        # The box's own inode numbers differ between two sandboxes: compare the rest.
        seen.append([line for line in lines if not re.match(r"(pid|mnt|ipc|uts|net|user) \w+:\[|\d+:.*:/", line)])
    assert spawned.box_info().spawner_pid is not None  # type: ignore[union-attr]
    assert chained.box_info().spawner_pid is None  # type: ignore[union-attr]
    assert seen[0] == seen[1]
    # And the agent's capabilities, no more: the bounding set is exactly AGENT_CAPABILITIES.
    bounding = next(line for line in seen[0] if line.startswith("CapBnd:")).split()[1]
    assert int(bounding, 16) == sum(1 << CAPABILITY_NUMBERS[name] for name in AGENT_CAPABILITIES)


def test_the_agent_cannot_see_or_kill_the_spawner(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    sb = pair[0]
    sb.shell("true")
    assert sb.run("echo first").output == "first\n"
    pid = _spawner_pid(sb)
    # Nothing in the agent's /proc runs python3 -I -S (the spawner) or is any process of the box's.
    seen = sb.shell("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").output
    assert "spawner" not in seen and "-I -S -B" not in seen, seen
    # A one-off holds its output and /dev/null only: not the spawner's socket (with it, the
    # agent could ask the spawner for a command with all of the box's capabilities).
    assert sb.run("ls /proc/self/fd").output.split() == ["0", "1", "2", "3"]
    assert sb.run("sleep 300 >/dev/null 2>&1 & echo started").output == "started\n"
    assert sb.shell("ls /proc/$(pgrep -x sleep)/fd").output.split() == ["0", "1", "2"]
    sb.shell("kill -9 -1; true")  # every process the agent may signal
    assert sb.run("echo still").output == "still\n"
    assert _spawner_pid(sb) == pid
    # A reset in place keeps it: it is the box's, not the episode's.
    sb.reset()
    assert sb.run("echo next").output == "next\n"
    assert _spawner_pid(sb) == pid


def _status_fields(pid: int, *names: str) -> list[str]:
    lines = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    return [lines[name].strip() for name in names]


def _system_python_at_least(version: tuple[int, int]) -> bool:
    try:
        out = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return tuple(int(x) for x in out) >= version


@pytest.mark.skipif(not _system_python_at_least((3, 11)), reason="the spawner starts commands itself on Python 3.11+")
def test_the_spawner_starts_one_offs_itself_and_comes_back_to_the_box_after_each(
        pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    sb = pair[0]
    sb.shell("true")
    pid = _spawner_pid(sb)
    info = sb.box_info()
    assert info is not None and info.namespace_pid is not None and info.agent_pid is not None
    box, agent = info.namespace_pid, info.agent_pid
    own = {ns: os.readlink(f"/proc/{pid}/ns/{ns}") for ns in ("mnt", "ipc")}
    assert own == {ns: os.readlink(f"/proc/{box}/ns/{ns}") for ns in ("mnt", "ipc")}
    assert {ns: os.readlink(f"/proc/{agent}/ns/{ns}") for ns in ("mnt", "ipc")} != own
    oom_before = open(f"/proc/{pid}/oom_score_adj").read()
    for _ in range(3):
        assert sb.run("cat /proc/self/oom_score_adj; readlink /proc/self/ns/mnt").output.split() == [
            sb.shell("cat /proc/self/oom_score_adj").output.strip(), os.readlink(f"/proc/{agent}/ns/mnt")]
    # It started them from itself (no copy of it that cut its own rights): its bounding set is
    # the commands', with no new privileges; and it is back in the box's namespaces and root.
    caps = sum(1 << CAPABILITY_NUMBERS[name] for name in AGENT_CAPABILITIES)
    assert _status_fields(pid, "CapBnd", "NoNewPrivs", "CapAmb") == [f"{caps:016x}", "1", "0000000000000000"]
    assert int(_status_fields(pid, "CapEff")[0], 16) & (1 << 21)  # still CAP_SYS_ADMIN: it enters namespaces
    assert {ns: os.readlink(f"/proc/{pid}/ns/{ns}") for ns in ("mnt", "ipc")} == own
    # Its root is the box's, not the agent's: /dev/shm there is the box's, not the agent's own.
    shm = {who: os.stat(f"/proc/{p}/root/dev/shm").st_dev
           for who, p in (("spawner", pid), ("box", box), ("agent", agent))}
    assert shm["spawner"] == shm["box"] != shm["agent"], shm
    assert _status_fields(pid, "State")[0].startswith("S")  # waiting for the next request
    assert open(f"/proc/{pid}/oom_score_adj").read() == oom_before


@pytest.mark.parametrize("says", [[], [b"forking"]], ids=["nothing", "forking"])
def test_a_spawner_that_says_forking_and_then_nothing_is_taken_as_stalled(says: list[bytes]) -> None:
    """A fake spawner (this test's thread) takes the request and says ``says``, then nothing:
    the one-off times out, and only one that was being started marks the spawner stalled
    (the box then drops it: its next one-offs take the exec chain)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    held: list[socket.socket] = []

    def fake() -> None:
        _, fds, _, _ = socket.recv_fds(theirs, 1 << 20, 7)
        channel = socket.socket(fileno=fds[0])
        for fd in fds[1:]:
            os.close(fd)
        for message in says:
            channel.send(message)
        held.append(channel)  # open, silent

    thread = threading.Thread(target=fake)
    thread.start()
    # Stands for nsenter, whose child the spawner is: it waits for that child.
    with subprocess.Popen(["sh", "-c", "sleep 30 & wait"]) as proc:
        spawner = Spawner(proc, ours)
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            spawner.run(["true"], agent_init=os.getpid(), cwd="/", env={}, oom_score_adj=None, nproc=None,
                        deadline=started + 0.5)
        assert time.monotonic() - started >= 0.5  # not before its deadline
        thread.join(timeout=5)
        assert spawner.stalled is bool(says)
        spawner.close()
        # A stalled spawner is killed (it would not see the close): its parent then ends by
        # itself; one that is not stalled is left to exit, and its parent is killed at 1 s.
        assert proc.returncode == (0 if says else -signal.SIGKILL)
    for channel in held:
        channel.close()
    theirs.close()


def test_when_the_spawner_is_killed_one_offs_go_through_the_exec_chain(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    sb = pair[0]
    sb.shell("true")
    assert sb.run("echo first").output == "first\n"
    pid = _spawner_pid(sb)
    os.kill(pid, signal.SIGKILL)  # from outside: the host's root, an OOM kill
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}/stat") and time.monotonic() < deadline:
        time.sleep(0.01)
    result = sb.run("pwd; echo $((6*7))")
    assert (result.exit_code, result.output) == (0, "/root\n42\n"), result
    assert sb.box_info().spawner_pid is None  # type: ignore[union-attr]
    assert sb.shell("echo shell").output == "shell\n"


def test_a_timed_out_one_off_is_killed_with_its_group(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    for sb in pair:
        sb.shell("true")
        result = sb.run("sleep 300 & sleep 301", timeout=0.5)
        assert result.timed_out and result.exit_code is None, result
        left = sb.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").output
        assert "sleep 30" not in left, left


def test_the_agent_cannot_stall_the_spawner_through_the_files_it_owns(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # The spawner started with the box, before the agent ran anything, and reads no file of the
    # agent's later (a FIFO at /etc/localtime stalled a spawner started lazily, with TZ unset).
    sb = pair[0]
    pid = _spawner_pid(sb)
    sb.shell("rm -f /etc/localtime && mkfifo /etc/localtime; mkfifo /tmp/fifo; cd /tmp")
    assert sb.run("echo checked", timeout=30).output == "checked\n"
    sb.reset()
    assert sb.run("echo next", timeout=30).output == "next\n"
    assert _spawner_pid(sb) == pid  # the same spawner: a stalled one is killed and replaced at the reset


def _holds_a_pidfd_of(pid: int) -> bool:
    """Whether this process holds a pidfd of ``pid`` (the host has it once the spawner said
    ``started``)."""
    for fd in os.listdir("/proc/self/fdinfo"):
        with contextlib.suppress(OSError):
            with open(f"/proc/self/fdinfo/{fd}") as f:
                if f"Pid:\t{pid}\n" in f.read():
                    return True
    return False


def _left_in_the_box(sb: LocalSandbox, command: str) -> bool:
    return command in sb.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").output


def test_a_spawner_killed_while_a_one_off_runs_is_noticed_at_once(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    sb = pair[0]
    sb.shell("true")
    pid = _spawner_pid(sb)
    results: list[ExecResult] = []
    # A one-off that never ends by itself: only noticing the spawner's death ends it, and a
    # second one-off queued behind it would time out.
    long_one = threading.Thread(target=lambda: results.append(sb.run("sleep 7304", timeout=60)))
    long_one.start()
    found = _commands_of(pid, "sleep", deadline_s=30)
    assert len(found) == 1, "the one-off did not start under the spawner"
    command = found[0]
    # Killed once the host holds the command's pidfd (the spawner said "started"); killed
    # before that: the next test.
    wait_until(lambda: _holds_a_pidfd_of(command), 30, "the spawner to hand the host the command's pidfd")
    os.kill(pid, signal.SIGKILL)
    result = sb.run("echo second", timeout=30)
    assert (result.exit_code, result.output) == (0, "second\n"), result  # through the chain
    # The one it ran is followed by no one now: the host killed it, and says so.
    long_one.join(timeout=60)
    assert results and results[0].exit_code == -9, results  # as run() reports a kill, not a timeout
    # And it is gone (a sleep that ended by itself hid a command that outlived its -9 here).
    wait_until(lambda: not _left_in_the_box(sb, "sleep 7304"), 30, "the one-off reported killed to be gone")


_PTRACE_SEIZE, _PTRACE_CONT, _PTRACE_DETACH = 0x4206, 7, 17
_PTRACE_O_TRACEFORK, _PTRACE_O_TRACEVFORKDONE = 0x2, 0x20
_PTRACE_EVENT_FORK, _PTRACE_EVENT_VFORK_DONE = 1, 5


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("start", [
    pytest.param("itself", marks=pytest.mark.skipif(not _system_python_at_least((3, 11)),
                                                    reason="the spawner starts commands itself on Python 3.11+")),
    pytest.param("by a child")])
def test_a_spawner_killed_before_it_hands_over_a_started_one_off_leaves_nothing_running(
        mechanism: str, start: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The spawner hands the host a command's pidfd ("started") only after the command's exec:
    # its vfork returns then, and a forked child runs on to its exec by itself. A spawner
    # killed before that (here stopped by us, its tracer, at that return or right after the
    # fork, and killed there) left a command running that the host had no handle on, reported
    # as killed. The host now kills what the dead spawner left: its children, which the kernel
    # gave to the box's init.
    if start == "by a child":  # a process limit to set (no pids cgroup): a forked child sets it
        monkeypatch.setattr(cgroup, "find_hierarchies", no_cgroup_here)
    libc = ctypes.CDLL(None, use_errno=True)
    sb = LocalSandbox(isolation=mechanism, warm_spare=False)  # type: ignore[arg-type]
    with sb:
        sb.shell("true")
        spawner = _spawner_pid(sb)
        options, event = ((_PTRACE_O_TRACEVFORKDONE, _PTRACE_EVENT_VFORK_DONE) if start == "itself"
                          else (_PTRACE_O_TRACEFORK, _PTRACE_EVENT_FORK))
        assert libc.ptrace(ctypes.c_long(_PTRACE_SEIZE), spawner, None, ctypes.c_void_p(options)) == 0, \
            ctypes.get_errno()
        results: list[ExecResult] = []
        long_one = threading.Thread(target=lambda: results.append(sb.run("sleep 7304", timeout=60)))
        try:
            long_one.start()

            def at_the_event() -> bool:
                pid, status = os.waitpid(spawner, os.WNOHANG | _WALL)
                if not pid or not os.WIFSTOPPED(status):
                    return False
                if status >> 16 == event:
                    return True
                libc.ptrace(ctypes.c_long(_PTRACE_CONT), spawner, None, ctypes.c_void_p(os.WSTOPSIG(status)))
                return False

            wait_until(at_the_event, 30, f"the spawner to stop at its start of the command ({start})")
            (child,) = _children_ints(spawner)
            if start == "by a child":  # traced from its fork on, and stopped: it goes on alone
                os.waitpid(child, _WALL)
                assert libc.ptrace(ctypes.c_long(_PTRACE_DETACH), child, None, None) == 0, ctypes.get_errno()
            assert not results
        finally:
            os.kill(spawner, signal.SIGKILL)
            os.waitpid(spawner, _WALL)  # its end, to us as its tracer: handed back to its parent
        long_one.join(timeout=60)
        assert results and results[0].exit_code == -9, results
        wait_until(lambda: not _left_in_the_box(sb, "sleep 7304"), 30, "the one-off reported killed to be gone")
        assert sb.run("echo next").output == "next\n"


def _commands_of(spawner: int, comm: str, deadline_s: float = 5.0) -> list[int]:
    """Host pids of the processes named ``comm`` below ``spawner`` (waits until there is one)."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if stat[stat.index("(") + 1:stat.rindex(")")] != comm:
                continue
            pid = int(entry)
            while pid > 1 and pid != spawner:  # up its ancestry
                with contextlib.suppress(OSError, ValueError):
                    with open(f"/proc/{pid}/stat") as f:
                        pid = int(f.read().rsplit(")", 1)[1].split()[1])
                    continue
                break
            if pid == spawner:
                found.append(int(entry))
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


_WALL = 0x40000000
"""``__WALL``: wait for a tracee that is not our child."""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_command_held_by_a_tracer_after_its_end_stalls_no_other_one_off(
        pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # A tracer (here us; in the box, the agent could) holds an ended command until it reaps it:
    # the spawner cannot reap it meanwhile, and must not wait for it.
    sb = pair[0]
    sb.shell("true")
    results: list[ExecResult] = []
    first = threading.Thread(target=lambda: results.append(sb.run("sleep 0.3; echo first", timeout=20)))
    first.start()
    (target,) = _commands_of(_spawner_pid(sb), "bash")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.ptrace(ctypes.c_long(0x4206), target, None, None) == 0, ctypes.get_errno()  # PTRACE_SEIZE
    try:
        deadline = time.monotonic() + 5  # until it has ended: a zombie only we may reap
        while (state := _state(target)) != "Z" and time.monotonic() < deadline:
            if state in "tT":  # stopped for us at a signal (its child's SIGCHLD): on with it
                pid, status = os.waitpid(target, os.WNOHANG | _WALL)
                if pid and os.WIFSTOPPED(status):
                    libc.ptrace(ctypes.c_long(7), target, None, ctypes.c_void_p(os.WSTOPSIG(status)))  # PTRACE_CONT
            time.sleep(0.005)
        assert state == "Z", state
        # Answered while the first is still held (a spawner waiting for it would time out here).
        assert sb.run("echo second", timeout=30).output == "second\n"
        assert _spawner_pid(sb) is not None and not results
    finally:
        os.waitpid(target, _WALL)  # reaped by us as its tracer: handed back to its parent
    first.join(timeout=5)
    assert results and (results[0].exit_code, results[0].output) == (0, "first\n"), results


def test_an_end_and_a_give_up_seen_together_leave_the_spawner_running(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # The host gives up on a command (timeout) while the spawner is held still: its end and
    # the closed channel then reach the spawner in one batch, the end first.
    sb = pair[0]
    sb.shell("true")
    spawner = _spawner_pid(sb)
    outcome: list[object] = []

    def give_up() -> None:
        try:
            outcome.append(sb.run("sleep 30", timeout=1))
        except BackendTimeoutError as exc:  # no end said while the spawner is stopped
            outcome.append(exc)

    thread = threading.Thread(target=give_up)
    thread.start()
    assert _commands_of(spawner, "sleep")
    os.kill(spawner, signal.SIGSTOP)
    try:
        thread.join(timeout=15)
        assert outcome, "run() did not return"
    finally:
        os.kill(spawner, signal.SIGCONT)
    # The batch handled: the ended command reaped (no zombie named sleep under the spawner), in
    # the same pass as the closed channel; the next one-off is answered after that pass.
    wait_until(lambda: not _commands_of(spawner, "sleep", deadline_s=0), 30, "the spawner to reap the command")
    assert sb.run("echo after").output == "after\n"
    assert _spawner_pid(sb) == spawner  # the same spawner: it did not die on the batch


def test_a_one_off_right_after_the_agent_ended_its_shell_sees_the_whole_box(
        pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # The new shell is up only once it has answered: a one-off that joined its namespaces while
    # bubblewrap (or unshare) was still making them saw half a root (no /usr: exit 127).
    for sb in pair:
        sb.shell("echo kept > /root/file")
        for _ in range(15):
            ended = sb.shell("exit 3")
            assert ended.exit_code == 3, ended
            result = sb.run("cat /root/file; grep -c kept /root/file")
            assert (result.exit_code, result.output) == (0, "kept\n1\n"), result
        # ... and ran in the new shell's namespaces, not the box's (which would taint the box).
        assert not sb.box_info().tainted  # type: ignore[union-attr]


def _host_pids_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
    return found


def test_the_agents_pid_1_leads_its_session_and_cannot_leave_its_group(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # A PID 1 that joined another group of its namespace (an earlier job's, which a timeout
    # spares) never finished dying when killed: the kernel waits for that group's pid, which
    # the dying PID 1 holds. Its box stayed on the host, unkillable. As a session leader (as
    # docker's PID 1 bash is) it cannot move.
    for sb in pair:
        assert sb.shell("ps -o pid=,pgid=,sid= -p $$").output.split() == ["1", "1", "1"]
        assert sb.shell("sleep 7301 & export J=$!; echo started").output.endswith("started\n")
        result = sb.shell("exec python3 -c 'import os, time; os.setpgid(0, int(os.environ[\"J\"])); "
                          "time.sleep(7302)'", timeout=5)
        assert "PermissionError" in result.output and result.output.endswith(EXITED_NOTE), result
        deadline = time.monotonic() + 5
        while (_host_pids_with("sleep 7301") or _host_pids_with("time.sleep(7302)")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _host_pids_with("sleep 7301") and not _host_pids_with("time.sleep(7302)")
        assert sb.shell("echo on; ps -o sid= -p $$").output.split() == ["on", "1"]
        sb.reset()
        assert sb.shell("echo next").output == "next\n"


def test_a_stuck_shell_replaced_takes_its_whole_pid_namespace(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    # A shell stuck in a loop of builtins is replaced: its PID 1 is killed through a pidfd,
    # and nothing of its namespace (an earlier job the timeout spared) is left on the host.
    for sb in pair:
        assert sb.shell("sleep 7303 & echo started").output.endswith("started\n")
        result = sb.shell("while :; do :; done", timeout=1)
        assert result.timed_out and "a new shell was started" in result.output, result
        assert not _host_pids_with("sleep 7303")
        assert sb.shell("echo on; ps -o sid= -p $$").output.split() == ["on", "1"]
