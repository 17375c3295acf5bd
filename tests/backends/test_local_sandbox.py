"""Behaviour of the local sandbox that the conformance suite does not cover: isolation, the
refusal to run unisolated, limits, recovery, and leaving nothing behind."""

from __future__ import annotations

import glob
import logging
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends import process
from agentunit_gym.backends.process import ProcessResult
from agentunit_gym.backends.sandbox.factory import open_sandbox, resolve_kind
from agentunit_gym.backends.sandbox.local import (
    ROOT_CALLER_UID,
    WRITABLE_DIRS,
    LocalSandbox,
    default_temp_parent,
    detect_isolation,
)
from agentunit_gym.errors import BackendError, BackendTimeoutError, ConfigError, IsolationError
from tests.backends.sandbox_conformance import SPAWN_UNTIL_REFUSED, count_procs
from tests.conftest import skip_without_cgroup

MECHANISMS = [pytest.param("bwrap", id="bwrap"), pytest.param("unshare", id="unshare")]


@pytest.fixture(params=MECHANISMS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    sb = LocalSandbox(isolation=request.param)
    sb.start()
    yield sb
    sb.close()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temp dir every user may traverse (pytest's tmp_path is private to its owner; as root the
    sandbox's tools run as an unprivileged uid that must reach the sandbox's dirs)."""
    path = Path(tempfile.mkdtemp(prefix="agentunit-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root callers drop to another uid")
def test_private_temp_dir_is_refused_as_root(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="cannot enter.*temp_dir"):
        LocalSandbox(temp_dir=str(private)).start()
    assert os.listdir(private) == []


def sandbox_pids(sb: LocalSandbox) -> int:
    """How many processes the sandbox's /proc shows (its pid namespace)."""
    out = sb.run("ls /proc | grep -c '^[0-9]'").output
    return int(out.strip())


def our_leftovers(temp_dir: str | None = None) -> dict[str, list[str]]:
    """Host-side traces local sandboxes of this test process could leave: temp dirs, cgroups,
    processes. Other sessions on the machine may run sandboxes too, so with ``temp_dir`` only
    the sandboxes made there count."""
    temp_dir = temp_dir or str(default_temp_parent())
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if os.path.join(temp_dir, "agentunit-gym-local-") in cmdline:
            procs.append(f"{entry}: {cmdline[:120]}")
    return {
        "temp_dirs": sorted(glob.glob(os.path.join(temp_dir, "agentunit-gym-local-*"))),
        "cgroups": sorted(glob.glob(f"/sys/fs/cgroup/pids/agentunit_gym-{os.getpid()}-*")),
        "processes": sorted(procs),
    }


# ------------------------------------------------------------------ refusing to run unisolated


class FakeRunner:
    """Stands in for process.RUNNER: every isolation probe fails, as on a machine without namespaces."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float, input: bytes | None,
                 env: dict[str, str] | None) -> ProcessResult:
        self.calls.append(tuple(argv))
        return ProcessResult(tuple(argv), 1, b"", b"bwrap: No permissions to creating new namespace")


def test_refuses_without_isolation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = FakeRunner()
    monkeypatch.setattr(process, "RUNNER", runner)
    sb = LocalSandbox(temp_dir=str(tmp_path))
    with pytest.raises(IsolationError) as info:
        sb.start()
    message = str(info.value)
    assert "bubblewrap" in message and "allow_unisolated=True" in message and "docker" in message
    # Both tools were probed through the process seam, bubblewrap first (as root, each behind
    # setpriv, which drops to the unprivileged uid that root inside maps to).
    tools = [next(arg for arg in call if arg in ("bwrap", "unshare")) for call in runner.calls]
    assert tools == ["bwrap", "unshare"]
    if os.geteuid() == 0:
        assert all(os.path.basename(call[0]) == "setpriv" and f"--reuid={ROOT_CALLER_UID}" in call
                   for call in runner.calls)
    assert sb.mechanism is None
    sb.close()
    assert os.listdir(tmp_path) == []  # nothing was created


def test_refuses_when_no_tool_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "which", lambda program: None)
    assert detect_isolation() is None
    with pytest.raises(IsolationError):
        LocalSandbox().start()


def test_refuses_without_nsenter(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = process.which
    monkeypatch.setattr(process, "which", lambda program: None if program == "nsenter" else real_which(program))
    with pytest.raises(IsolationError, match="nsenter.*util-linux"):
        LocalSandbox().start()


def test_falls_back_to_unshare_when_bwrap_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = process.which
    monkeypatch.setattr(process, "which", lambda program: None if program == "bwrap" else real_which(program))
    with LocalSandbox() as sb:
        assert sb.mechanism == "unshare"
        assert sb.shell("touch /usr/x 2>&1; echo $?").output.endswith("1\n")


def test_unisolated_needs_explicit_opt_in(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError):
        LocalSandbox(isolation="none")
    monkeypatch.setattr(process, "RUNNER", FakeRunner())
    with caplog.at_level(logging.WARNING, logger="agentunit_gym"), LocalSandbox(allow_unisolated=True) as sb:
        assert sb.mechanism == "none"
        assert any("UNISOLATED" in record.message for record in caplog.records)
        # Commands run on the host, in a private working dir that reset wipes.
        assert sb.shell("echo hi > here.txt; cat here.txt").output == "hi\n"
        workdir = sb.shell("pwd").output.strip()
        assert workdir.startswith(str(default_temp_parent())) and Path(workdir, "here.txt").exists()
        assert sb.shell("echo $HOME").output.strip() == workdir
        assert sb.shell("sleep 1000", timeout=1).timed_out
        assert sb.shell("echo $((1+1))").output == "2\n"
        sb.reset()
        assert not Path(workdir, "here.txt").exists()


def test_invalid_options() -> None:
    with pytest.raises(ConfigError):
        LocalSandbox(isolation="chroot")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        LocalSandbox(pids_limit=3)
    with pytest.raises(ConfigError):
        LocalSandbox(workdir="relative")
    with LocalSandbox() as sb, pytest.raises(ConfigError):
        sb.run("x", language="ruby")  # type: ignore[arg-type]


# ------------------------------------------------------------------ isolation


def test_root_inside_with_own_pid_namespace(sandbox: LocalSandbox) -> None:
    assert sandbox.shell("id -u; id -g").output == "0\n0\n"
    assert sandbox_pids(sandbox) < 8  # no host process is visible
    assert sandbox.read_file("/proc/sys/kernel/hostname") == b"sandbox\n"


def test_network_access_fails(sandbox: LocalSandbox) -> None:
    probe = ("import socket\n"
             "for host in ('1.1.1.1', '127.0.0.1'):\n"
             "    try:\n"
             "        socket.create_connection((host, 80), timeout=3).close(); print(host, 'connected')\n"
             "    except OSError as exc:\n"
             "        print(host, 'failed', type(exc).__name__)\n")
    result = sandbox.run(probe, language="python")
    assert "connected" not in result.output
    assert result.output.count("failed") == 2
    # Only a loopback interface exists, and the host's daemon sockets are not reachable.
    interfaces = sandbox.run("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
    assert interfaces == ["lo"]
    assert sandbox.shell("test -e /run/docker.sock || test -e /var/run/docker.sock; echo $?").output == "1\n"


def test_system_dirs_are_read_only_and_etc_is_the_sandboxs_own(sandbox: LocalSandbox) -> None:
    for path in ("/usr/agentunit_probe", "/agentunit_probe", "/etc/alternatives/agentunit_probe"):
        result = sandbox.shell(f"touch {path} 2>&1")
        assert result.exit_code == 1 and "Read-only file system" in result.output
        assert not Path(path).exists()
    assert sandbox.shell("mount -o remount,rw / 2>/dev/null; echo $?").output.strip() != "0"
    with pytest.raises(BackendError, match="only /etc, /tmp"):
        sandbox.write_file("/usr/agentunit_probe", b"x")
    for d in WRITABLE_DIRS:
        assert sandbox.shell(f"touch {d}/agentunit_probe && echo ok").output == "ok\n", d
        assert not Path(d, "agentunit_probe").exists()  # the sandbox's own dir, not the host's
    # /etc is a fresh one: our users, not the host's, and a shadow file nobody planted.
    assert sandbox.read_file("/etc/passwd").decode().splitlines()[-1].startswith("agent:x:1000:1000:")
    assert sandbox.shell("useradd -m jack && grep -c '^jack:' /etc/passwd").output == "1\n"
    assert "jack" not in Path("/etc/passwd").read_text()


@pytest.mark.parametrize("where", ["tmp", "shm"])
def test_private_dirs_hide_the_host(sandbox: LocalSandbox, where: str) -> None:
    # The host's /tmp, and the host's /dev/shm where the sandbox's own dirs live by default.
    base = Path(tempfile.gettempdir()) if where == "tmp" else Path("/dev/shm")
    if not base.is_dir():
        pytest.skip(f"no {base} on this host")
    marker = base / f"host-only-{secrets.token_hex(4)}"
    marker.write_text("host")
    try:
        assert sandbox.shell(f"test -e {marker}; echo $?").output == "1\n"
        # Nothing of the host's temp dir shows, the sandbox's own dirs included.
        assert sandbox.host_dir is not None
        assert sandbox.shell(f"ls -A {base} | grep -c . || true").output.strip() == "0"
        assert sandbox.shell(f"test -e {sandbox.host_dir}; echo $?").output == "1\n"
        sandbox.shell(f"echo sandbox > {marker}")
        assert marker.read_text() == "host"
    finally:
        marker.unlink()


def test_symlinks_cannot_redirect_writes_to_the_host(sandbox: LocalSandbox) -> None:
    release = Path("/usr/lib/os-release").read_bytes()
    sandbox.shell("ln -s /usr/lib/os-release /tmp/evil; ln -s /usr /root/usr-link")
    with pytest.raises(BackendError, match="resolves to '/usr/lib/os-release'"):
        sandbox.write_file("/tmp/evil", b"pwned")
    with pytest.raises(BackendError):
        sandbox.write_file("/root/usr-link/lib/os-release", b"pwned")
    assert Path("/usr/lib/os-release").read_bytes() == release
    # A link inside the writable dirs is followed as the sandbox would follow it.
    sandbox.shell("mkdir /root/real && ln -s /root/real /tmp/alias && ln -s ../root/real/f /tmp/rel")
    sandbox.write_file("/tmp/alias/f", b"through the link")
    assert sandbox.shell("cat /root/real/f").output == "through the link"
    assert sandbox.read_file("/tmp/rel") == b"through the link"
    # Reading through a link to a read-only system dir sees the host's (read-only) file.
    assert sandbox.read_file("/tmp/evil") == release
    # A link to a host path the sandbox does not have is not followed on the host.
    sandbox.shell("ln -s /work /tmp/out; ln -s /proc/1/root/etc/shadow /tmp/shadow")
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("/tmp/out/x")
    with pytest.raises(BackendError):
        sandbox.write_file("/tmp/out/x", b"pwned")


def test_rm_rf_root_leaves_host_and_next_episode_intact(tmp_path: Path) -> None:
    canary_dir = Path("/var/lib") / f"agentunit-canary-{secrets.token_hex(4)}"
    canary_dir.mkdir()
    (canary_dir / "file").write_text("keep")
    try:
        with LocalSandbox() as sb:
            result = sb.shell("rm -rf --no-preserve-root / 2>/dev/null; ls -A /tmp /root | wc -w", timeout=120)
            assert not result.timed_out
            assert (canary_dir / "file").read_text() == "keep"
            assert Path("/usr/bin/bash").exists()
            sb.reset()
            assert sb.shell("echo ok; ls /usr/bin | wc -l").output.startswith("ok\n")
            assert int(sb.shell("ls /usr/bin | wc -l").output) == len(os.listdir("/usr/bin"))
    finally:
        (canary_dir / "file").unlink()
        canary_dir.rmdir()


# ------------------------------------------------------------------ limits


def processes_in_namespace(sb: LocalSandbox) -> int:
    """Host-side count of the processes in the sandbox's pid namespace and in the agent's within
    it (needs no fork inside)."""
    info = sb.box_info()
    assert info is not None and info.namespace_pid is not None
    inits = [info.namespace_pid, info.agent_pid]
    targets = {os.readlink(f"/proc/{pid}/ns/pid") for pid in inits if pid is not None}
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.readlink(f"/proc/{entry}/ns/pid") in targets
            except OSError:
                continue
    return count


def require_process_limit(sb: LocalSandbox) -> None:
    """Skip when no process limit can apply: no writable pids cgroup and no prlimit."""
    info = sb.box_info()
    if info is not None and info.process_limit == "none":
        skip_without_cgroup("no writable pids cgroup and no prlimit: no process limit applies (see docs)")


def test_pids_limit_holds(sandbox: LocalSandbox) -> None:
    sb = LocalSandbox(isolation=sandbox.mechanism, pids_limit=40)  # type: ignore[arg-type]
    with sb:
        require_process_limit(sb)
        info = sb.box_info()
        assert info is not None
        if info.pids_cgroup is not None:
            assert info.cgroup_dirs["pids"] == info.pids_cgroup
            assert (info.pids_cgroup / "pids.max").read_text().strip() == "40"
        word, started, *errno = sb.run(SPAWN_UNTIL_REFUSED, language="python", timeout=30).output.split()
        assert word == "refused" and errno == ["11"]  # EAGAIN
        assert 20 < int(started) < 40


def test_fork_bomb_is_contained_and_reset_is_clean(sandbox: LocalSandbox) -> None:
    sb = LocalSandbox(isolation=sandbox.mechanism, pids_limit=64)  # type: ignore[arg-type]
    with sb:
        require_process_limit(sb)
        # Through run(), which does not kill runaways (shell() does: see the conformance suite),
        # measured while that run() is still going (its output not into run()'s pipe: SIGPIPE).
        bomb = threading.Thread(target=sb.run, args=("exec >/dev/null 2>&1; bomb() { bomb | bomb & }; bomb; sleep 2",),
                                kwargs={"timeout": 5})
        bomb.start()
        # Poll (with a deadline) while that run() goes on, sampling the bomb's size.
        peak, samples, deadline = 0, 0, time.monotonic() + 20
        while bomb.is_alive() and (peak <= 16 or samples < 10) and time.monotonic() < deadline:
            peak = max(peak, processes_in_namespace(sb))
            samples += 1
        bomb.join(timeout=10)
        assert 16 < peak <= 64  # it grew, and stopped at the limit
        assert "survived\n" in sb.shell("echo survived", timeout=10).output  # bomb noise may surround it
        sb.reset()
        info = sb.box_info(wait_s=20)  # the next episode's shell, started in the background, is up
        assert info is not None and info.next_shell_pid is not None
        # The box's init and holder, the agent's shell and its unshare, the next shell's unshare,
        # and the one-off spawner the bomb's run() started (it outlives a reset in place).
        assert info.spawner_pid is not None
        assert processes_in_namespace(sb) <= 6
        assert sb.shell("ls -A /tmp").output == ""


def test_100mb_of_output_is_capped_in_constant_memory(sandbox: LocalSandbox) -> None:
    tracemalloc.start()
    try:
        result = sandbox.shell("head -c 104857600 /dev/zero | tr '\\0' x", max_output=1 << 16, timeout=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0 and result.truncated
    assert result.output_bytes == 104857600
    assert result.output == "x" * (1 << 16)
    assert peak < 3 * 1024 * 1024, f"peak {peak} bytes"


# ------------------------------------------------------------------ timeouts and recovery


def test_timeout_spares_earlier_background_jobs(sandbox: LocalSandbox) -> None:
    sandbox.shell("sleep 300 &")
    result = sandbox.shell("sleep 1000 & sleep 1001", timeout=1)
    assert result.timed_out
    # The job started before the timed-out command lives on; what that command started is gone.
    assert count_procs(sandbox, "sleep") == 1
    assert "sleep 300" in sandbox.shell("jobs").output


def test_a_timeout_spares_earlier_jobs_the_shell_has_not_listed_yet(sandbox: LocalSandbox,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Under load a command can time out before the shell has even written its jobs file (it
    # does so as the command starts): the jobs running before the command are spared all the same.
    # The command itself removes the jobs file (the shell writes it before each command).
    sandbox.shell("sleep 300 &")
    result = sandbox.shell("rm -f /run/.agentunit-gym-jobs; sleep 1000 & sleep 1001", timeout=1)
    assert result.timed_out
    assert count_procs(sandbox, "sleep") == 1
    assert "sleep 300" in sandbox.shell("jobs").output


def test_a_jobs_file_turned_into_a_symlink_is_not_followed_on_the_host(sandbox: LocalSandbox) -> None:
    # After a timeout the host reads the shell's jobs file, which the agent can replace: a
    # symlink to /dev/zero (or a FIFO) would have the host read forever.
    sandbox.shell("sleep 300 &")
    result = sandbox.shell("ln -sf /dev/zero /run/.agentunit-gym-jobs; sleep 1000", timeout=1)
    assert result.timed_out  # returned: the host did not read /dev/zero through the link
    assert count_procs(sandbox, "sleep") == 1  # the earlier job is still spared (it was running before)


def test_loop_inside_the_shell_gets_a_new_shell(sandbox: LocalSandbox) -> None:
    sandbox.write_file("/tmp/kept.txt", b"files survive")
    result = sandbox.shell("while :; do :; done", timeout=1)
    assert result.timed_out and "a new shell was started" in result.output
    assert sandbox.shell("cat /tmp/kept.txt").output == "files survive"


def test_exit_gives_a_new_shell(sandbox: LocalSandbox) -> None:
    sandbox.shell("sleep 300 &")  # holds the terminal open: the exit must still be seen
    sandbox.shell("cd /tmp; export GONE=1")
    result = sandbox.shell("echo bye; exit 3", timeout=10)
    assert result.output.startswith("bye\nexit\n") and result.exit_code == 3
    assert "a new shell was started" in result.output
    # A fresh shell: back in the working dir, without the old variables.
    assert sandbox.shell('echo again; pwd; echo "[$GONE]"').output == "again\n/root\n[]\n"


def test_background_output_shows_with_the_next_command(sandbox: LocalSandbox) -> None:
    sandbox.shell("(sleep 0.2; echo late; touch /tmp/late-done) &")
    # Wait (with a deadline) until the background job has printed, instead of sleeping.
    deadline = time.monotonic() + 20
    while not sandbox.run("test -e /tmp/late-done").ok:
        assert time.monotonic() < deadline, "the background job never finished"
    output = sandbox.shell("echo now").output
    # As in an interactive shell, bash may add a "[1]+ Done ..." notice for the finished job.
    assert output.startswith("late\n") and output.endswith("now\n")


def test_killed_sandbox_raises_and_reset_recovers(sandbox: LocalSandbox) -> None:
    sandbox.shell("echo 1 > /tmp/x")
    info = sandbox.box_info()
    assert info is not None and info.namespace_pid is not None and info.holder_pid is not None
    os.kill(info.namespace_pid, signal.SIGKILL)  # as if the processes were killed from outside
    assert wait_exited(info.holder_pid, 5)  # the kill has taken effect (a command sent earlier could still run)
    with pytest.raises(BackendError, match="reset"):
        sandbox.shell("echo hello")
    with pytest.raises(BackendError):
        sandbox.run("echo hello")
    sandbox.reset()
    assert sandbox.shell("echo hello; ls -A /tmp").output == "hello\n"


def test_reset_is_in_place_and_kills_every_process_of_the_episode(sandbox: LocalSandbox) -> None:
    box = sandbox.box_info()
    assert box is not None and box.holder_pid is not None and box.shell_pid is not None
    sandbox.shell("sleep 300 & (setsid sleep 301 >/dev/null 2>&1 &); echo x > /tmp/x; cd /tmp")
    sandbox.run("nohup sleep 302 >/dev/null 2>&1 &")
    agent = sandbox.box_info().agent_pid  # type: ignore[union-attr]
    assert agent is not None
    in_episode = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                  if _same_pid_namespace(pid, agent)]
    assert len(in_episode) >= 4  # the shell and three sleeps
    # The next episode's shell is already up, and out of this episode's sight.
    next_shell = sandbox.box_info(wait_s=20).next_shell_pid  # type: ignore[union-attr]
    assert next_shell is not None
    listing = sandbox.shell("ps -A -o comm= > /tmp/ps.txt; sort /tmp/ps.txt | tr '\\n' ' '").output
    assert listing.split() == ["bash", "ps", "sleep", "sleep", "sleep"]
    sandbox.reset()
    after = sandbox.box_info()
    assert after is not None and after.box_dir == box.box_dir and after.holder_pid == box.holder_pid  # same namespaces
    assert after.shell_pid == next_shell and after.shell_pid != box.shell_pid
    assert not [pid for pid in in_episode if os.path.exists(f"/proc/{pid}")]  # gone when reset returned
    assert sandbox.shell("pwd; ls -A /tmp").output == "/root\n"
    assert count_procs(sandbox, "sleep") == 0


def wait_exited(pid: int, timeout: float) -> bool:
    """Whether the process ``pid`` has exited (a zombie counts) within ``timeout`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _same_pid_namespace(pid: int, other: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino == os.stat(f"/proc/{other}/ns/pid").st_ino
    except OSError:
        return False


def test_the_loaders_files_are_read_only(sandbox: LocalSandbox) -> None:
    # A few programs run in the box with all of root's capabilities there (setpriv on the way
    # into run(), what starts the agent's shell): a library the agent named in
    # /etc/ld.so.preload, or a rewritten /etc/ld.so.cache, would run in them with every one.
    tries = sandbox.shell("for f in /etc/ld.so.preload /etc/ld.so.cache; do { echo /tmp/x.so >> $f; } 2>/dev/null; "
                          "echo $?; rm -f $f 2>/dev/null; mv $f /tmp/ 2>/dev/null; test -f $f; echo $?; done; "
                          "wc -c < /etc/ld.so.preload")
    assert tries.output.split() == ["1", "0", "1", "0", "0"]
    assert int(sandbox.shell("wc -c < /etc/ld.so.cache").output) > 0  # the template's, in use
    expected = sum(1 << bit for bit in (0, 1, 3, 4, 5, 6, 7, 10, 29))
    assert int(sandbox.run("grep CapEff /proc/self/status").output.split()[1], 16) == expected


def test_a_changed_ptmx_is_put_back_by_a_reset_in_place(sandbox: LocalSandbox) -> None:
    # On bubblewrap the agent's shells share the box's /dev/pts, where root may change the mode
    # and owner of ptmx: the next episode's programs could not open a terminal. A reset in
    # place puts them back (the box is kept: no new /dev per shell or per box).
    if sandbox.mechanism != "bwrap":
        pytest.skip("only a bubblewrap box has a /dev/pts")
    box = sandbox.box_info()
    assert box is not None
    view = "stat -c '%a %u %g' /dev/pts/ptmx; python3 -c 'import os; os.openpty(); print(\"pty\")' 2>&1 | tail -1"
    assert sandbox.shell(view).output == "666 0 0\npty\n"
    owner = "1:1" if sandbox.multi_user else "0:0"
    changed = sandbox.shell(f"chmod 600 /dev/pts/ptmx && chown {owner} /dev/pts/ptmx && stat -c '%a %u' /dev/pts/ptmx")
    assert changed.output == f"600 {owner.split(':')[0]}\n"
    assert sandbox.shell("touch /dev/planted 2>&1; echo $?").output.endswith("1\n")  # /dev itself: read-only
    sandbox.reset()
    assert sandbox.box_info().box_dir == box.box_dir  # type: ignore[union-attr]
    assert sandbox.shell(view).output == "666 0 0\npty\n"


def test_a_box_whose_mounts_moved_is_replaced_on_reset(sandbox: LocalSandbox) -> None:
    # Renaming a dir of /etc moves the read-only trees mounted inside it: reset cannot put that
    # back in place, so it starts a new box, where /etc/ssl/certs is the template's again.
    box = sandbox.box_info()
    assert box is not None
    certs = sandbox.shell("ls /etc/ssl/certs | wc -l").output
    assert int(certs) > 0
    moved = sandbox.shell("mv /etc/ssl /etc/ssl-moved && ls /etc/ssl-moved/certs | wc -l")
    assert moved.exit_code == 0 and moved.output == certs
    sandbox.reset()
    assert sandbox.box_info().box_dir != box.box_dir  # type: ignore[union-attr]
    assert sandbox.shell("ls /etc/ssl/certs | wc -l; ls -d /etc/ssl-moved 2>&1 | grep -c 'No such'").output \
        == f"{certs}1\n"
    assert sandbox.shell("touch /etc/ssl/certs/x 2>&1").exit_code != 0  # read-only again


def test_a_command_run_with_no_agent_shell_makes_the_next_reset_replace_the_box(sandbox: LocalSandbox) -> None:
    # With the agent's shell gone, run() enters the box's own namespaces: what it leaves there
    # is not the agent's to clear, so the box is not reused.
    box = sandbox.box_info()
    assert box is not None
    agent = box.agent_pid
    assert agent is not None
    os.kill(agent, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{agent}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sandbox.run("nohup sleep 303 >/dev/null 2>&1 & echo started").output == "started\n"
    assert sandbox.box_info().tainted  # type: ignore[union-attr]
    sandbox.reset()
    assert sandbox.box_info().box_dir != box.box_dir and count_procs(sandbox, "sleep") == 0  # type: ignore[union-attr]


def test_a_reset_in_place_that_fails_falls_back_to_a_new_box(sandbox: LocalSandbox) -> None:
    box = sandbox.box_info()
    assert box is not None
    sandbox.inject_fault("reset.shell", BackendTimeoutError("the shell did not answer"))
    sandbox.shell("echo x > /tmp/x; sleep 300 &")
    sandbox.reset()
    assert sandbox.box_info().box_dir != box.box_dir  # type: ignore[union-attr]
    assert sandbox.shell("ls -A /tmp").output == "" and count_procs(sandbox, "sleep") == 0
    new = sandbox.box_info().box_dir  # type: ignore[union-attr]
    sandbox.reset()  # the fault was met once: this reset is in place again
    assert sandbox.box_info().box_dir == new  # type: ignore[union-attr]


def test_a_reset_in_place_that_meets_an_os_error_falls_back_to_a_new_box(sandbox: LocalSandbox) -> None:
    # Putting the dirs back can fail (a full tmpfs): the old box is stopped, a new one used.
    box = sandbox.box_info()
    assert box is not None and box.holder_pid is not None
    sandbox.inject_fault("reset.dirs", OSError(28, "No space left on device"))
    sandbox.shell("echo x > /tmp/x")
    sandbox.reset()
    assert sandbox.box_info().box_dir != box.box_dir  # type: ignore[union-attr]
    assert wait_exited(box.holder_pid, 5)  # the old box's holder is gone
    assert sandbox.shell("ls -A /tmp").output == ""


def test_closed_sandbox_refuses_work() -> None:
    sb = LocalSandbox()
    assert sb.host_dir is None
    sb.start()
    host_dir = sb.host_dir
    assert host_dir is not None and host_dir.is_dir()
    sb.write_file("/tmp/x", b"x")
    sb.close()
    assert sb.host_dir is None and not host_dir.exists()
    with pytest.raises(BackendError, match="closed"):
        sb.shell("echo x")


# ------------------------------------------------------------------ leaving nothing behind


def test_200_episodes_leave_nothing_behind(open_tmp: Path) -> None:
    temp_dir = str(open_tmp)
    empty: dict[str, list[str]] = {"temp_dirs": [], "cgroups": [], "processes": []}
    assert our_leftovers(temp_dir) == empty
    sb = LocalSandbox(temp_dir=temp_dir)
    for episode in range(150):
        sb.reset() if episode else sb.start()
        result = sb.shell(f"echo {episode} > /tmp/e; sleep 100 & cat /tmp/e")
        assert result.output.endswith(f"\n{episode}\n")  # after the "[1] <pid>" job notice
        if episode == 10:  # while running: one temp dir, processes, one cgroup (when writable)
            running = our_leftovers(temp_dir)
            assert len(running["temp_dirs"]) == 1 and running["processes"]
    sb.close()
    for episode in range(50):  # whole sandboxes too, every other one never used after start
        with LocalSandbox(temp_dir=temp_dir) as other:
            if episode % 2:
                assert other.run("echo ok").output == "ok\n"
    assert our_leftovers(temp_dir) == empty
    assert os.listdir(open_tmp) == []


# ------------------------------------------------------------------ choosing a sandbox (factory)


@pytest.mark.parametrize(("daemon", "expected"), [(False, "local"), (True, "docker")])
def test_auto_picks_docker_only_when_a_daemon_answers(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture,
                                                       daemon: bool, expected: str) -> None:
    monkeypatch.setattr(process, "docker_available", lambda timeout=3.0: daemon)
    with caplog.at_level(logging.INFO, logger="agentunit_gym"):
        assert resolve_kind("auto") == expected
    lines = [r.message for r in caplog.records if r.name == "agentunit_gym"]
    assert len(lines) == 1 and lines[0].startswith(f"sandbox backend: {expected}")


def test_explicit_kinds_do_not_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(timeout: float = 3.0) -> bool:
        raise AssertionError("probed the daemon")

    monkeypatch.setattr(process, "docker_available", fail)
    assert resolve_kind("local") == "local" and resolve_kind("docker") == "docker"


def test_unknown_kind_and_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="podman"):
        resolve_kind("podman")
    with pytest.raises(ConfigError, match="podman"):
        open_sandbox("podman")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="colour"):
        open_sandbox("local", colour="blue")


def test_open_local_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "docker_available", lambda timeout=3.0: False)
    sb = open_sandbox("auto", pids_limit=100)
    try:
        assert isinstance(sb, LocalSandbox) and sb.kind == "local" and sb.pids_limit == 100
        assert sb.shell("echo via-factory").output == "via-factory\n"
    finally:
        sb.close()


def test_docker_is_imported_lazily() -> None:
    code = ("import sys, agentunit_gym.backends.sandbox.factory as f; "
            "f.open_sandbox('local').close(); "
            "print('agentunit_gym.backends.sandbox.docker' in sys.modules, 'docker' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.docker
def test_open_docker_sandbox() -> None:
    sb = open_sandbox("docker")
    try:
        assert sb.kind == "docker"
        assert sb.shell("echo from-docker").output == "from-docker\n"
    finally:
        sb.close()


def test_run_returns_when_a_daemon_keeps_its_output_open(sandbox: LocalSandbox) -> None:
    # Init scripts start daemons that inherit the output pipe: run() returns when the script ends.
    result = sandbox.run("sleep 100 & echo started", timeout=20)
    assert result.output == "started\n" and result.exit_code == 0  # ended with the script, not timed out
    assert count_procs(sandbox, "sleep") == 1  # the daemon lives on


def test_run_timeout_holds_when_the_command_closes_its_output(sandbox: LocalSandbox) -> None:
    result = sandbox.run("echo bye; exec >&- 2>&-; sleep 100", timeout=1)
    assert result.timed_out and result.output == "bye\n"  # the timeout, not the command's end 100 s later


def test_rlimit_fallback_without_a_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a writable pids cgroup, processes entering the sandbox carry RLIMIT_NPROC (which
    # binds root callers too: their sandboxes run as an unprivileged uid).
    from agentunit_gym.backends.sandbox import local

    monkeypatch.setattr(local.cgroup, "find_hierarchies", no_cgroup_here)
    # RLIMIT_NPROC counts every process of the host uid, and every root caller's sandboxes run
    # as the same one: leave room for those already running (other sandboxes on this machine).
    limit = 77 + _processes_of(ROOT_CALLER_UID) if os.geteuid() == 0 else 77 + _processes_of(os.geteuid())
    sb = LocalSandbox(pids_limit=limit)
    with sb:
        info = sb.box_info()
        assert info is not None and info.process_limit == "rlimit" and info.cgroup_dirs == {}
        assert "pids" not in sb.limits_off and {"memory", "cpu"} <= set(sb.limits_off)
        for limits in (sb.shell("cat /proc/self/limits").output, sb.run("cat /proc/self/limits").output):
            line = next(x for x in limits.splitlines() if x.startswith("Max processes"))
            assert line.split()[2:4] == [str(limit), str(limit)]


def test_rlimit_applies_when_the_cgroup_has_memory_but_no_pids(monkeypatch: pytest.MonkeyPatch) -> None:
    # A host that delegates memory and cpu but not pids (as some systemd setups): the box's
    # processes join the cgroup and still carry RLIMIT_NPROC, as limits_off promises.
    from agentunit_gym.backends.sandbox.local import cgroup

    real = cgroup.find_hierarchies

    def no_pids(controllers: Iterable[str] = cgroup.CONTROLLERS, *,
                enable: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
        found, missing = real(controllers, enable=enable)
        if "pids" in found or "pids" in missing:
            found.pop("pids", None)
            missing["pids"] = "no pids controller here (test)"
        return found, missing

    monkeypatch.setattr(cgroup, "find_hierarchies", no_pids)
    limit = 77 + _processes_of(ROOT_CALLER_UID) if os.geteuid() == 0 else 77 + _processes_of(os.geteuid())
    with LocalSandbox(pids_limit=limit) as sb:
        info = sb.box_info()
        assert info is not None and "pids" not in info.cgroup_dirs
        if not info.cgroup_dirs:
            skip_without_cgroup("no writable memory or cpu cgroup here either (test_rlimit_fallback_without_a_cgroup)")
        assert info.process_limit == "rlimit" and "pids" not in sb.limits_off
        for limits in (sb.shell("cat /proc/self/limits").output, sb.run("cat /proc/self/limits").output):
            line = next(x for x in limits.splitlines() if x.startswith("Max processes"))
            assert line.split()[2:4] == [str(limit), str(limit)]


def no_cgroup_here(controllers: Iterable[str] = (), *, enable: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """A host without a writable cgroup, for ``cgroup.find_hierarchies``."""
    return {}, {name: "no cgroup here (test)" for name in controllers or ("memory", "cpu", "pids")}


def _processes_of(uid: int) -> int:
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            continue
    return count


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_agents_ctrl_c_works_when_the_caller_ignores_sigint(mechanism: str) -> None:
    """A caller started with SIGINT ignored (``nohup``, a background job of a script) used to pass
    that on to the box: a nested shell's busy loop could not be interrupted at its timeout,
    and the shell was killed instead of kept."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup: the box starts from the defaults anyway
    try:
        with LocalSandbox(isolation=mechanism) as sandbox:
            sandbox.start()
            assert sandbox.shell("grep '^SigIgn' /proc/self/status").output.split()[1] == "0" * 16
            assert sandbox.shell("sh", timeout=10).exit_code == 0
            sandbox.shell("INNER=1")
            result = sandbox.shell("while :; do :; done", timeout=1.0)
            assert result.timed_out
            assert sandbox.shell('echo "$0 $INNER"').output == "sh 1\n"  # the nested shell was kept
    finally:
        signal.signal(signal.SIGINT, before)
        signal.signal(signal.SIGHUP, hup)


@pytest.mark.parametrize("spawner", [True, False], ids=["spawner", "exec-chain"])
def test_a_one_off_starts_in_the_workdir_without_an_exec_of_its_own(sandbox: LocalSandbox, spawner: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    argvs: list[list[str]] = []
    real_popen = subprocess.Popen

    def spy(args: Sequence[str], *rest: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        argvs.append(list(args))
        return real_popen(args, *rest, **kwargs)

    with LocalSandbox(isolation=sandbox.mechanism, spawner=spawner, warm_spare=False) as sb:  # type: ignore[arg-type]
        sb.shell("true")  # the agent's shell is up: one-offs go into its namespaces
        assert sb.run("true").exit_code == 0  # the first one starts the box's spawner
        info = sb.box_info()
        assert info is not None and (info.spawner_pid is not None) == spawner
        monkeypatch.setattr(subprocess, "Popen", spy)
        result = sb.run('pwd; cd /tmp && bash -c pwd; echo "$0 $*"', args=("a", "b c"))
        assert result.output == "/root\n/tmp\nbash a b c\n", result
        assert sb.run("import os; print(os.getcwd())", language="python").output == "/root\n"
    if spawner:  # the spawner forked both: no process of ours, no chain
        assert argvs == [], argvs
        return
    # nsenter changes to the workdir inside the mount namespace; no env --chdir in the chain.
    one_offs = [argv for argv in argvs if "--preserve-credentials" in argv and "--wdns=/root" in argv]
    assert len(one_offs) == 2 and not any(arg.startswith("--chdir") for argv in one_offs for arg in argv), argvs


@pytest.mark.parametrize("mechanism", ["bwrap", "unshare"])
def test_a_one_off_whose_workdir_is_gone_does_not_run(mechanism: str) -> None:
    with LocalSandbox(isolation=mechanism, workdir="/root/project") as sb:  # type: ignore[arg-type]
        sb.shell("mkdir /root/project")
        assert sb.run("pwd").output == "/root/project\n"
        sb.shell("cd / && rm -rf /root/project")
        for language, code in (("bash", "echo ran"), ("python", "print('ran')")):
            result = sb.run(code, language=language)  # type: ignore[arg-type]
            # nsenter's message (util-linux 2.38): "cannot open current working directory";
            # env's, where nsenter has no --wdns: "cannot change directory to '/root/project'".
            assert result.exit_code != 0 and "directory" in result.output and "ran" not in result.output, result
