"""DockerSandbox against the real daemon: the shell, limits, reset, isolation, hygiene."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends import process
from agentunit_gym.backends.images import LABEL
from agentunit_gym.backends.sandbox.base import Sandbox
from agentunit_gym.backends.sandbox.docker import DockerSandbox
from agentunit_gym.errors import BackendError, ConfigError

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    docker = process.docker_client()
    yield docker
    docker.close()


@pytest.fixture(scope="module")
def shared(client: Any) -> Iterator[DockerSandbox]:
    """One sandbox for the tests that only need a working shell (reset before each)."""
    with DockerSandbox(client=client, pool_size=0) as sandbox:
        yield sandbox


@pytest.fixture()
def sb(shared: DockerSandbox) -> DockerSandbox:
    shared.reset()
    return shared


def _containers_of(client: Any, sandbox: DockerSandbox) -> list[Any]:
    """Containers (running or not) of one sandbox, its warm pool included."""
    return client.containers.list(all=True, filters={"label": f"{LABEL}.sandbox={sandbox.instance_id}"})


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# -- the shell ---------------------------------------------------------------------------------------


def test_is_a_sandbox_of_kind_docker() -> None:
    assert issubclass(DockerSandbox, Sandbox) and DockerSandbox.kind == "docker"
    with pytest.raises(ConfigError, match="pids_limit"):
        DockerSandbox(pids_limit=1)


def test_cwd_variables_functions_and_background_jobs_persist(sb: DockerSandbox) -> None:
    assert sb.shell("mkdir -p /srv/w && cd /srv/w && export GREETING='hi there' && LOCAL=7").ok
    assert sb.shell("greet() { echo \"$GREETING/$LOCAL\"; }").ok
    result = sb.shell("pwd; greet")
    assert result.output == "/srv/w\nhi there/7\n" and result.exit_code == 0
    started = sb.shell("sleep 300 & echo started $!")
    pid = started.output.split()[-1]
    jobs = sb.shell("jobs -l; kill -0 " + pid + " && echo alive")
    assert "sleep 300" in jobs.output and jobs.output.endswith("alive\n")


def test_exit_codes(sb: DockerSandbox) -> None:
    assert sb.shell("true").exit_code == 0
    assert sb.shell("false").exit_code == 1
    assert sb.shell("(exit 42)").exit_code == 42
    assert sb.shell("ls /definitely-missing").exit_code == 2
    bad = sb.shell("if then fi")
    assert bad.exit_code == 2 and "syntax error" in bad.output
    assert sb.shell("echo -n abc; printf 'no newline'").output == "abcno newline"


def test_commands_see_a_terminal_without_pagers(sb: DockerSandbox) -> None:
    # As in AgentBench's shell, stdout is a terminal; pagers are off so git log cannot block.
    result = sb.shell("[ -t 1 ] && echo tty; mkdir -p /tmp/r && cd /tmp/r && git init -q && "
                      "git -c user.email=a@b -c user.name=a commit -q --allow-empty -m first && git log --format=%s",
                      timeout=10)
    assert result.output == "tty\nfirst\n" and not result.timed_out


def test_agent_exit_reports_code_and_gives_a_new_shell(sb: DockerSandbox) -> None:
    sb.shell("cd /tmp")
    result = sb.shell("exit 7")
    assert result.exit_code == 7 and not result.timed_out
    after = sb.shell("pwd")
    assert after.ok and after.output == "/root\n"  # a fresh shell after the agent's own exit


@pytest.mark.parametrize("command", ["sleep 1000", "yes > /dev/null", "cat", "sleep 1000 | cat",
                                     "while true; do :; done"])
def test_timeout_kills_the_command_and_keeps_the_shell(sb: DockerSandbox, command: str) -> None:
    sb.shell("cd /opt; export KEEP=kept; sleep 500 &")
    started = time.monotonic()
    result = sb.shell(command, timeout=1.0)
    assert result.timed_out and result.exit_code is None and not result.ok
    assert time.monotonic() - started >= 1.0  # not before its timeout (how long after: bench_timeouts.py)
    after = sb.shell("pwd; echo $KEEP; jobs | grep -c 'sleep 500'; pgrep -c -x yes || true; pgrep -x cat || true")
    assert after.output == "/opt\nkept\n1\n0\n", after.output


def test_output_cap_counts_everything_and_keeps_the_head(sb: DockerSandbox) -> None:
    result = sb.shell("for i in $(seq 1 2000); do printf '%05d\\n' $i; done", max_output=600)
    assert result.truncated and result.exit_code == 0
    assert result.output_bytes == 2000 * 6
    assert len(result.output.encode()) == 600
    assert result.output.startswith("00001\n00002\n")
    small = sb.shell("echo short", max_output=600)
    assert not small.truncated and small.output_bytes == 6


def test_100_mb_of_output_is_drained_without_growing_our_memory(sb: DockerSandbox) -> None:
    peak = [_rss_kib()]
    baseline = peak[0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kib())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = sb.shell("head -c 100000000 /dev/zero | tr '\\0' x", timeout=120, max_output=4096)
    finally:
        done.set()
        sampler.join()
    assert result.exit_code == 0 and result.truncated
    assert result.output_bytes == 100_000_000
    assert result.output == "x" * 4096
    assert peak[0] - baseline < 8 * 1024, f"RSS grew by {(peak[0] - baseline) / 1024:.1f} MiB"
    assert sb.shell("echo still here").output == "still here\n"


def test_unicode_round_trip_and_invalid_bytes(sb: DockerSandbox) -> None:
    text = "héllo ✓ 日本語 🎉 \"quotes\" 'single' $HOME \\back"
    result = sb.shell("cat <<'EOF'\n" + text + "\nEOF")
    assert result.output == text + "\n"
    assert sb.shell("printf 'a\\xffb'").output == "a\ufffdb"
    sb.write_file("/tmp/ü.txt", "ünïcödé\n".encode())
    assert sb.shell("cat /tmp/ü.txt").output == "ünïcödé\n"


def test_file_round_trip(sb: DockerSandbox) -> None:
    payload = bytes(range(256)) * 64
    sb.write_file("/root/deep/dir/blob.bin", payload, mode=0o750)
    assert sb.read_file("/root/deep/dir/blob.bin") == payload
    expected_md5 = hashlib.md5(payload).hexdigest()
    assert sb.shell("stat -c %a /root/deep/dir/blob.bin; md5sum < /root/deep/dir/blob.bin").output \
        == f"750\n{expected_md5}  -\n"
    sb.shell("printf 'from shell' > /tmp/s.txt")
    assert sb.read_file("/tmp/s.txt") == b"from shell"
    assert sb.read_file("/tmp/s.txt", max_bytes=4) == b"from"
    sb.write_file("/tmp/s.txt", b"")
    assert sb.read_file("/tmp/s.txt") == b""
    with pytest.raises(FileNotFoundError):
        sb.read_file("/no/such/file")
    with pytest.raises(IsADirectoryError):
        sb.read_file("/etc")
    with pytest.raises(BackendError, match="writing /etc"):
        sb.write_file("/etc", b"x")


def test_run_is_root_outside_the_shell_with_args_and_deadline(sb: DockerSandbox) -> None:
    sb.shell("cd /tmp && export ONLY_IN_SHELL=1 && echo data > /tmp/shared")
    result = sb.run('echo "$1|$2|$(whoami)|${ONLY_IN_SHELL:-unset}|$(cat /tmp/shared)"; exit 3',
                    args=("a b", "c"))
    assert result.output == "a b|c|root|unset|data\n" and result.exit_code == 3
    py = sb.run("import sys, os; print(sys.argv[1:], os.getcwd())", language="python", args=("x", "y"))
    assert py.output == "['x', 'y'] /root\n" and py.ok
    slow = sb.run("echo begin; sleep 100", timeout=1.0)
    assert slow.timed_out and slow.exit_code is None and slow.output == "begin\n"  # the timeout, not its end
    assert sb.run("sleep 300 & echo bg").output == "bg\n"  # a background child does not hold run() up
    with pytest.raises(ConfigError):
        sb.run("x", language="perl")  # type: ignore[arg-type]


def test_agent_lacks_admin_capabilities(sb: DockerSandbox) -> None:
    result = sb.shell("mount -t tmpfs tmpfs /mnt 2>&1; echo rc=$?; chroot / true 2>&1; echo rc=$?; "
                      "grep CapBnd /proc/self/status")
    assert "rc=32" in result.output or "permission denied" in result.output.lower()
    assert "chroot: cannot change root directory to '/': Operation not permitted" in result.output
    bounding = int(result.output.split("CapBnd:")[1].strip(), 16)
    for cap in (8, 18, 21):  # SETPCAP, SYS_CHROOT, SYS_ADMIN
        assert not bounding & (1 << cap)
    assert bounding & 1  # CHOWN kept


# -- reliability and security ------------------------------------------------------------------------


def test_network_access_fails(sb: DockerSandbox) -> None:
    curl = sb.shell("curl -sS -m 5 http://deb.debian.org/ >/dev/null", timeout=15)
    assert curl.exit_code not in (0, None)
    py = sb.shell("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"", timeout=15)
    assert py.exit_code == 1 and "Network is unreachable" in py.output
    interfaces = sb.shell("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split()
    assert interfaces == ["lo"]


def test_fork_bomb_is_contained_and_the_next_reset_is_clean(client: Any) -> None:
    with DockerSandbox(client=client, pool_size=0, pids_limit=64) as sandbox:
        # Through run(), which leaves background processes be (shell() kills a flood of them
        # after the command: see the conformance suite), so the bomb fills the pids limit.
        # (Its output not into run()'s pipe: SIGPIPE would end it once run() returns.)
        sandbox.run("exec >/dev/null 2>&1; :(){ :|:& };:", timeout=5)
        pids: dict[str, int] = {}
        deadline = time.monotonic() + 10
        while pids.get("current", 0) < 60 and time.monotonic() < deadline:  # the bomb fills the limit
            pids = client.api.stats(sandbox.container_name, stream=False, one_shot=True)["pids_stats"]
        assert pids["limit"] == 64 and 60 <= pids["current"] <= 64
        subprocess.run(["true"], check=True, timeout=10)  # the host can still start processes
        name = sandbox.container_name
        sandbox.reset()
        assert sandbox.container_name == name and sandbox.recreated == 0  # restored in place
        # ps alone, then sorted: a pipeline member caught between fork and exec would show as "bash".
        procs = sandbox.shell("procs=$(ps -e -o comm=); printf '%s\\n' \"$procs\" | sort").output
        assert procs.split() == ["bash", "ps"]  # the agent's own pid namespace
        after = client.api.stats(sandbox.container_name, stream=False, one_shot=True)["pids_stats"]
        assert after["current"] == 3  # docker-init, the supervisor, the new shell


def test_memory_limit_kills_the_hog_not_the_sandbox(client: Any) -> None:
    # The container's limit is memory + disk (the agent's files are in memory): 256 + 64 MiB.
    with DockerSandbox(client=client, pool_size=0, memory="256m", disk="64m") as sandbox:
        sandbox.shell("cd /tmp")
        hog = sandbox.shell("python3 -c 'x = bytearray(600 * 1024 * 1024)'", timeout=30)
        assert hog.exit_code == 137 and "Killed" in hog.output
        assert sandbox.shell("pwd").output == "/tmp\n"


def test_rm_rf_root_leaves_host_and_next_episode_intact(client: Any, tmp_path: Path) -> None:
    marker = tmp_path / "host-marker"
    marker.write_text("host")
    with DockerSandbox(client=client, pool_size=0) as sandbox:
        sandbox.shell("rm -rf --no-preserve-root / 2>/dev/null", timeout=120)
        assert sandbox.shell("ls /bin/bash 2>&1").exit_code != 0  # it really went
        sandbox.reset()
        after = sandbox.shell("ls /bin/bash && . /etc/os-release && echo $ID && python3 -c 'print(6*7)'")
        assert after.ok and after.output == "/bin/bash\ndebian\n42\n"
        assert sandbox.recreated == 0
    assert marker.read_text() == "host" and Path("/etc/passwd").is_file()


def test_killed_container_raises_typed_error_and_reset_recovers(client: Any) -> None:
    with DockerSandbox(client=client, pool_size=0) as sandbox:
        sandbox.shell("cd /tmp")
        dead_name = sandbox.container_name
        client.api.kill(dead_name)
        with pytest.raises(BackendError, match="reset"):
            sandbox.shell("echo hi")
        with pytest.raises(BackendError):
            sandbox.run("echo hi")
        sandbox.reset()
        assert sandbox.container_name != dead_name and sandbox.recreated == 1
        assert sandbox.shell("pwd; echo ok").output == "/root\nok\n"
        assert not client.containers.list(all=True, filters={"name": dead_name})


def test_agent_python_cleanup_spares_the_supervisor(sb: DockerSandbox) -> None:
    sb.shell("python3 -c 'import time; time.sleep(300)' &")
    result = sb.shell("pkill python3; killall python3; pkill -f python; kill -TERM -1; sleep 0.2; "
                      "pgrep -c python || true")
    assert result.output.strip().endswith("0")
    assert sb.shell("echo alive; trap").output == "alive\n"  # a fresh shell, default signal handling


def test_the_supervisor_is_out_of_the_agents_reach(client: Any) -> None:
    with DockerSandbox(client=client, pool_size=0) as sandbox:
        sandbox.shell("sleep 300 &")
        seen = sandbox.shell("echo sup=$(pgrep -c -x agentunit-sup) init=$(pgrep -c docker-init); "
                             "kill -9 -1; sleep 0.2; echo survived").output
        assert "sup=0 init=0" in seen and seen.endswith("survived\n")
        assert sandbox.shell("jobs -r; echo ok").output == "ok\n"  # kill -1 took the agent's own job
        sandbox.reset()
        assert sandbox.recreated == 0 and sandbox.shell("echo ok").output == "ok\n"


def test_process_view_matches_docker_run_of_the_image(client: Any) -> None:
    # The same init script in a plain `docker run IMAGE bash -c ...` and in the sandbox (run(), as
    # the OS env runs init scripts), then the same listing: the same processes, the same count.
    from agentunit_gym.backends.images import LABEL

    init = "sleep 1000 >/dev/null 2>&1 & (setsid sleep 1001 >/dev/null 2>&1 &); useradd -m jack; sleep 0.3"
    # ps alone, into a file: in a pipeline it races the pipeline's other members being started.
    listing = ("ps -A -o comm= > /tmp/ps.txt; ps -A > /tmp/psa.txt; sort /tmp/ps.txt | tr '\\n' ' '; echo; "
               "wc -l < /tmp/psa.txt")
    with DockerSandbox(client=client, pool_size=0) as sandbox:
        plain = client.containers.run(sandbox.image, ["bash", "-c", f"{init}; {listing}; true"], network_mode="none",
                                      remove=True, labels={LABEL: "1"}).decode()
        assert sandbox.run(init).exit_code == 0
        ours = sandbox.shell(listing).output
        found = sandbox.shell("find / -name no-such-file-anywhere; echo find=$?")
    # Same shape: bash (PID 1: the shell there, the agent's shell here), the init's two sleeps,
    # and the listing's own processes.
    assert ours.split() == plain.split() == ["bash", "ps", "sleep", "sleep", "5"]
    assert found.output == "find=0\n"  # no unreadable /proc entries of processes the agent cannot see


def test_warm_pool_replaces_a_dead_container(client: Any) -> None:
    with DockerSandbox(client=client, pool_size=1) as sandbox:
        deadline = time.monotonic() + 30
        while len(sandbox._pool) < 1 and time.monotonic() < deadline:  # wait for the refill (with a deadline)
            time.sleep(0.05)
        assert len(sandbox._pool) == 1
        spare = sandbox._pool[0].name
        client.api.kill(sandbox.container_name)
        sandbox.reset()
        assert sandbox.container_name == spare
        assert sandbox.shell("echo pooled").output == "pooled\n"
    assert not _containers_of(client, sandbox)


def test_200_episodes_leave_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def children() -> set[int]:
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        found.add(int(entry.name))
                except (OSError, IndexError):
                    continue
        return found

    def descriptors() -> dict[int, str]:
        found = {}
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
                found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        return found

    # Earlier tests' garbage is collected first, and the collector stays off during the test:
    # a descriptor that only the collector would close (issue 19: the attach socket's SocketIO)
    # is then counted every time, whatever the machine's load, instead of now and then.
    gc.collect()
    gc.disable()
    try:
        before_children = children()
        before_fds = descriptors()
        # A client of the test's own, closed at the end: the SDK keeps an idle connection per URL
        # in its pools, which is the client's to release, not the sandbox's.
        client = process.docker_client()
        # Every temp file or dir our process makes lands here (other tests share the real /tmp).
        private_tmp = tmp_path / "tmp"
        private_tmp.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
        with DockerSandbox(client=client, pool_size=0) as sandbox:
            for episode in range(200):
                sandbox.reset()
                result = sandbox.shell(f"sleep 1000 & echo episode {episode}; touch /tmp/e{episode}")
                assert result.ok and f"episode {episode}" in result.output
            inside = sandbox.shell("procs=$(ps -e -o comm=); printf '%s\\n' \"$procs\" | sort; ls /tmp")
            # Only the last episode's background sleep and file: the 199 before were cleared.
            assert inside.output.split() == ["bash", "ps", "sleep", "e199"]
            assert sandbox.recreated == 0
            assert len(_containers_of(client, sandbox)) == 1
        assert not _containers_of(client, sandbox)
        client.close()
        assert children() == before_children
        assert descriptors() == before_fds
        assert list(private_tmp.iterdir()) == []
    finally:
        gc.enable()


# No timestamps anywhere: a pristine sandbox made in one minute and a reset one in the next
# must still compare equal (`ls -la /dev` did not, at minute boundaries). `ps` runs alone
# before its output is sorted: piped into `sort`, it could catch sort between fork and exec,
# named "bash", and two equal sandboxes differed on a loaded machine.
FINGERPRINT = r"""
cd /
find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/au \) -prune -o \
     -printf '%p %y %m %U %G %s %l\n' | sort | sha256sum | cut -c1-16
find /etc /root /home /opt /usr/local /var -xdev -type f -exec cat {} + 2>/dev/null | sha256sum | cut -c1-16
find /dev /dev/shm -maxdepth 1 -printf '%p %y %m %U %G\n' | sort | sha256sum | cut -c1-16
getent passwd | sha256sum | cut -c1-16
procs=$(ps -e -o user=,comm=); printf '%s\n' "$procs" | sort; unset procs
env | grep -v -e '^_=' -e '^SHLVL=' | sort
pwd; jobs; alias; declare -F | wc -l; umask
"""


def test_nothing_leaks_into_the_next_episode(client: Any) -> None:
    dirty = r"""
echo leak > /etc/leak.conf; sed -i 's/^root:/toor:/' /etc/passwd; rm -f /etc/debian_version
echo 'alias ll=ls' >> /root/.bashrc; mkdir -p /home/agent/stuff && echo x > /home/agent/stuff/f
echo x > /opt/leak; echo x > /tmp/leak; echo x > /var/tmp/leak; echo x > /usr/local/bin/leak
echo x > /usr/bin/newtool; chmod 777 /etc/shadow; rm -rf /usr/share/zoneinfo; touch /dev/leak /dev/shm/leak
useradd -m intruder; chown intruder /root
nohup sleep 9999 >/dev/null 2>&1 &
setsid bash -c 'while true; do sleep 1; done' >/dev/null 2>&1 < /dev/null &
su intruder -c 'sleep 9998 &'
export LEAKED=1; alias gone=true; leakfn() { :; }; umask 077; cd /opt
"""
    with DockerSandbox(client=client, pool_size=0) as pristine, DockerSandbox(client=client, pool_size=0) as used:
        expected = pristine.shell(FINGERPRINT, timeout=120)
        assert expected.ok, expected.output
        assert used.shell(FINGERPRINT, timeout=120).output == expected.output  # same start
        assert used.shell(dirty, timeout=60).exit_code is not None
        changed = used.shell(FINGERPRINT, timeout=120)
        assert changed.output != expected.output
        assert "intruder" in changed.output and "LEAKED=1" in changed.output
        used.reset()
        restored = used.shell(FINGERPRINT, timeout=120)
        assert restored.output == expected.output
        assert used.recreated == 0  # restored in place, not by recreating


def test_close_is_idempotent_and_removes_everything(client: Any) -> None:
    sandbox = DockerSandbox(client=client, pool_size=1)
    sandbox.start()
    deadline = time.monotonic() + 30
    while len(sandbox._pool) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_containers_of(client, sandbox)) == 2  # the sandbox and its warm spare
    sandbox.close()
    sandbox.close()
    assert not _containers_of(client, sandbox)
    with pytest.raises(BackendError, match="closed"):
        sandbox.shell("true")


def test_limits_and_isolation_settings(sb: DockerSandbox, client: Any) -> None:
    config = client.api.inspect_container(sb.container_name)
    host = config["HostConfig"]
    assert host["NetworkMode"] == "none" and host["Init"] is True and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "SYS_ADMIN" in host["CapAdd"]
    # The shared defaults (limits.py): memory 1 GiB + disk 1 GiB for the container, no swap.
    assert host["PidsLimit"] == 512 and host["NanoCpus"] == 10**9
    assert host["Memory"] == host["MemorySwap"] == 2 << 30
    assert host["LogConfig"]["Type"] == "none"
    assert config["Config"]["Labels"][LABEL] == "1"
    assert config["Name"].lstrip("/").startswith("agentunit-os-")


def test_unusable_images_raise_typed_errors_and_leave_nothing(client: Any) -> None:
    from agentunit_gym.backends.images import resolve_base

    base = resolve_base(client=client)  # a Debian base without python3
    if client.containers.run(base, ["sh", "-c", "command -v python3 || true"], remove=True).strip():
        pytest.skip(f"{base} has python3")
    sandbox = DockerSandbox(client=client, image=base, pool_size=0)
    with pytest.raises(BackendError, match="did not start"):
        sandbox.start()
    assert not _containers_of(client, sandbox)
    sandbox.close()
    missing = DockerSandbox(client=client, image="agentunit-gym/missing:nope", pool_size=0)
    with pytest.raises(ConfigError, match="images build os"):
        missing.start()
    missing.close()


def test_a_forgotten_close_is_done_at_exit(client: Any) -> None:
    script = ("from agentunit_gym.backends.sandbox.docker import DockerSandbox\n"
              "box = DockerSandbox(pool_size=1)\n"
              "print(box.instance_id, box.shell('echo up').output.strip(), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    instance_id, status = done.stdout.split()
    assert status == "up"
    assert not client.containers.list(all=True, filters={"label": f"{LABEL}.sandbox={instance_id}"})
