"""The sandbox conformance suite: one set of behaviours every sandbox implementation must show.

``test_sandbox_conformance.py`` runs :class:`SandboxConformance` once per kind in
:data:`SANDBOX_KINDS`: ``local`` (bubblewrap here), ``local-unshare`` (the local sandbox's
fallback without bubblewrap) and ``docker`` (marked ``docker``). The ``sandbox`` fixture
is one sandbox per kind for the whole class, reset before every test, so every test also
checks that a reset leaves a usable, clean sandbox behind.

Expected values are computed here (hashlib, literal strings), never by the sandbox.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends.sandbox.base import Sandbox
from tests.conftest import skip_without_cgroup

SANDBOX_KINDS = [
    pytest.param("local", id="local"),
    pytest.param("local-unshare", id="local-unshare"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]

CHECKOUT = Path(__file__).resolve().parents[2]
"""This project's checkout: the sandbox must not see it either."""
HOST_CANARY_DIRS = (Path("/etc"), Path("/root"), Path("/home"), Path("/var/tmp"), CHECKOUT)

FORK_BOMB = ":(){ :|:& };:"

TOUCH_THE_LIMIT_LEAVE_THREE = """python3 -c '
import subprocess
procs = []
try:
    while True:
        procs.append(subprocess.Popen(["sleep", "300"]))
except OSError:
    pass
for p in procs[3:]:
    p.kill()
    p.wait()
print("left", len(procs[:3]))
'"""
"""Starts processes until the pids limit refuses one, then ends all but three, which it leaves
standing still: below any count, but the limit was reached."""

FILL_THE_LIMIT_LATER = "(sleep 0.5; for i in $(seq 100); do sleep 300 & done; wait) &"

SLOW_SPAWNER = """sleep 300 & sleep 300 & sleep 300 & python3 -c '
import os, time
for _ in range(20):
    end = time.process_time() + 0.01
    while time.process_time() < end:
        pass
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
time.sleep(300)
' &"""

SPAWN_UNTIL_REFUSED = """
import subprocess
procs = []
try:
    for _ in range(200):
        procs.append(subprocess.Popen(["sleep", "60"]))
    print("all", len(procs))
except OSError as exc:
    print("refused", len(procs), exc.errno)
for p in procs:
    p.kill()
"""
"""Starts processes until the kernel refuses one; prints ``refused N errno`` (or ``all N``)."""

BUSY_TWO_FOR_1_5_S = """
import os, time
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
t = os.times()
print(round(t.children_user + t.children_system, 3))
"""
"""Two busy processes for 1.5 s of wall time; prints the CPU seconds they used together."""

LIMITS: dict[str, Any] = {"memory": "256m", "disk": "64m", "pids_limit": 64, "cpus": 0.5}
"""The limits of the resource tests' sandbox: small, so a bomb costs the shared machine little."""

# Counts processes whose command name is $1, with /proc only (no procps needed in the sandbox).
COUNT_PROCS = 'n=0; for f in /proc/[0-9]*/comm; do [ "$(cat "$f" 2>/dev/null)" = "$1" ] && n=$((n+1)); done; echo $n'


# What an episode could leave behind, as seen from the agent's shell: the writable trees
# (names, types, modes, file sizes), the exported environment, and the running processes.
FINGERPRINT = r"""
find /tmp /root /home /var/tmp -xdev -type f -printf '%p %M %s\n' 2>/dev/null | sort
find /tmp /root /home /var/tmp -xdev ! -type f -printf '%p %M\n' 2>/dev/null | sort
echo ---
env | grep -v -E '^(PWD|OLDPWD|SHLVL|_)=' | sort
echo ---
procs=""
for f in /proc/[0-9]*/comm; do read -r c < "$f" 2>/dev/null && procs+="$c"$'\n'; done
printf '%s' "$procs" | sort | uniq -c
"""
# The process census reads /proc with builtins only, in the shell itself, before any pipeline
# starts: a census taken inside a pipeline races its own members (a forked child is still
# "bash" until it has exec'd "sort"), which made two identical sandboxes differ under load.

DIRTY_EPISODE = r"""
mkdir -p /tmp/a/b /root/.cache/x /home/someone /var/tmp/v && echo data > /tmp/a/b/f && echo v > /var/tmp/v/f
mkdir /tmp/locked && touch /tmp/locked/f && chmod 000 /tmp/locked
ln -s /etc/passwd /root/link; mkfifo /tmp/fifo; echo 'export FROM_RC=1' >> /root/.bashrc
rm -f /root/.profile
setsid sleep 500 > /dev/null 2>&1 < /dev/null &
sleep 501 &
export EPISODE_VAR=1; cd /tmp
"""


def make_sandbox(kind: str, **options: Any) -> Sandbox:
    """A new, not yet started sandbox of ``kind`` with its default options (and ``options``)."""
    if kind == "local":
        from agentunit_gym.backends.sandbox.local import LocalSandbox

        return LocalSandbox(**options)
    if kind == "local-unshare":
        from agentunit_gym.backends.sandbox.local import LocalSandbox

        return LocalSandbox(isolation="unshare", **options)
    if kind == "docker":
        from agentunit_gym.backends.sandbox.docker import DockerSandbox  # lazy: may not be importable everywhere

        return DockerSandbox(**options)
    raise ValueError(kind)


KEYRING_PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
what, name = sys.argv[1], sys.argv[2].encode()
USER_KEYRING = -4
if what == "add":  # add_key("user", name, "secret", 6, @u)
    r = libc.syscall(248, b"user", name, b"secret", 6, USER_KEYRING)
else:  # keyctl(KEYCTL_SEARCH, @u, "user", name, 0)
    r = libc.syscall(250, 10, USER_KEYRING, b"user", name, 0)
print(what.replace("add", "added").replace("find", "found") if r >= 0 else f"errno {ctypes.get_errno()}")
"""
"""Adds (``add NAME``) or looks up (``find NAME``) a key in the caller's user keyring (x86_64
syscall numbers); prints ``added``/``found`` or ``errno N``."""


def _keyring_search(name: str) -> str:
    """The host side of :data:`KEYRING_PROBE` ``find``, in this (the test's) process."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    found = libc.syscall(250, 10, -4, b"user", name.encode(), 0)
    return "found" if found >= 0 else f"errno {ctypes.get_errno()}"


def count_procs(sandbox: Sandbox, name: str) -> int:
    result = sandbox.run(COUNT_PROCS, args=(name,), timeout=20)
    assert result.exit_code == 0, result
    return int(result.output.strip())


class SandboxConformance:
    """Behaviours shared by every :class:`Sandbox` implementation."""

    @pytest.fixture(scope="class", params=SANDBOX_KINDS)
    @classmethod
    def sandbox_kind(cls, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(scope="class")
    @classmethod
    def sandbox_instance(cls, sandbox_kind: str) -> Iterator[Sandbox]:
        sandbox = make_sandbox(sandbox_kind)
        sandbox.start()
        yield sandbox
        sandbox.close()

    @pytest.fixture
    def sandbox(self, sandbox_instance: Sandbox) -> Sandbox:
        sandbox_instance.reset()
        return sandbox_instance

    # ---------------------------------------------------------------- files

    def test_binary_file_round_trip(self, sandbox: Sandbox) -> None:
        data = bytes(range(256)) * 64 + b"\x00\xff tail"
        sandbox.write_file("/tmp/conf/bin/all-bytes.dat", data)
        assert sandbox.read_file("/tmp/conf/bin/all-bytes.dat") == data
        # The agent's shell sees the same bytes.
        shown = sandbox.shell("sha256sum /tmp/conf/bin/all-bytes.dat")
        assert shown.exit_code == 0
        assert shown.output.split()[0] == hashlib.sha256(data).hexdigest()

    def test_unicode_name_and_content_round_trip(self, sandbox: Sandbox) -> None:
        path = "/root/dossier été/файл 名前 ✓.txt"
        text = "naïve café ✓ 東京 🙂\nligne 2\n"
        sandbox.write_file(path, text.encode("utf-8"))
        assert sandbox.read_file(path).decode("utf-8") == text
        assert sandbox.shell(f"cat '{path}'").output == text
        assert sandbox.shell("ls '/root/dossier été' | cat").output == "файл 名前 ✓.txt\n"

    def test_file_written_by_shell_is_read_back(self, sandbox: Sandbox) -> None:
        sandbox.shell("mkdir -p /tmp/made && printf 'x=%s\\n' 'ü' > /tmp/made/by-shell.txt")
        assert sandbox.read_file("/tmp/made/by-shell.txt") == "x=ü\n".encode()

    def test_write_file_replaces_and_sets_mode(self, sandbox: Sandbox) -> None:
        sandbox.write_file("/tmp/tool.sh", b"old")
        sandbox.write_file("/tmp/tool.sh", b"#!/bin/sh\necho tool ran\n", mode=0o755)
        assert sandbox.shell("stat -c %a /tmp/tool.sh").output.strip() == "755"
        assert sandbox.shell("/tmp/tool.sh").output == "tool ran\n"
        sandbox.write_file("/tmp/private", b"p", mode=0o600)
        assert sandbox.shell("stat -c %a /tmp/private").output.strip() == "600"

    def test_read_missing_file_raises_file_not_found(self, sandbox: Sandbox) -> None:
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("/tmp/no/such/file.txt")

    def test_read_file_of_the_image(self, sandbox: Sandbox) -> None:
        # A file the sandbox did not write: the system's own /etc/passwd has root on line one.
        assert sandbox.read_file("/etc/passwd").startswith(b"root:")

    # ---------------------------------------------------------------- output

    def test_unicode_output(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("printf 'h\\303\\251llo \\342\\234\\223 \\346\\235\\261\\n'")
        assert result.output == "héllo ✓ 東\n"
        assert result.output_bytes == len("héllo ✓ 東\n".encode())

    def test_invalid_utf8_is_replaced(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("printf 'a\\377b\\n'")
        assert result.output == "a\ufffdb\n"
        assert result.output_bytes == 4

    def test_stderr_is_interleaved_with_stdout(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("echo out1; echo err1 >&2; echo out2")
        assert result.output == "out1\nerr1\nout2\n"

    def test_shell_commands_see_a_terminal(self, sandbox: Sandbox) -> None:
        # As in AgentBench's shell: stdout is a tty (``ls`` quotes names with spaces), newlines
        # arrive unchanged (no "\r\n"), and a pipe is not a tty.
        assert sandbox.shell("[ -t 1 ] && echo tty; echo x | { [ -t 0 ] || echo piped; }").output == "tty\npiped\n"
        sandbox.shell("mkdir -p /tmp/tty && touch '/tmp/tty/a b'")
        assert sandbox.shell("ls /tmp/tty").output == "'a b'\n"

    def test_output_without_trailing_newline_does_not_leak(self, sandbox: Sandbox) -> None:
        assert sandbox.shell("printf abc").output == "abc"
        assert sandbox.shell("echo next").output == "next\n"

    def test_output_cap(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("head -c 300000 /dev/zero | tr '\\0' a; echo done >&2", max_output=1000)
        assert result.truncated
        assert result.output_bytes == 300000 + len("done\n")
        assert result.output[:1000] == "a" * 1000
        assert result.exit_code == 0
        # The rest was drained: the shell is in step with us.
        assert sandbox.shell("echo in-step").output == "in-step\n"

    def test_output_at_cap_is_not_truncated(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("printf 12345", max_output=5)
        assert (result.output, result.truncated, result.output_bytes) == ("12345", False, 5)

    def test_run_output_cap(self, sandbox: Sandbox) -> None:
        result = sandbox.run("head -c 50000 /dev/zero | tr '\\0' b", max_output=100)
        assert result.truncated and result.output_bytes == 50000 and result.output == "b" * 100

    # ---------------------------------------------------------------- exit codes

    @pytest.mark.parametrize(("command", "code"), [("true", 0), ("false", 1), ("(exit 42)", 42),
                                                   ("ls /no/such/dir", 2), ("no-such-command-xyz", 127)])
    def test_shell_exit_codes(self, sandbox: Sandbox, command: str, code: int) -> None:
        result = sandbox.shell(command)
        assert result.exit_code == code
        assert result.ok == (code == 0)
        assert not result.timed_out

    def test_syntax_error_is_an_exit_code_not_a_dead_shell(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("echo 'unterminated")
        assert result.exit_code not in (0, None)
        assert sandbox.shell("echo alive").output == "alive\n"

    def test_run_exit_codes(self, sandbox: Sandbox) -> None:
        assert sandbox.run("exit 7").exit_code == 7
        assert sandbox.run("raise SystemExit(5)", language="python").exit_code == 5
        assert sandbox.run("print('ok')", language="python").output == "ok\n"

    # ---------------------------------------------------------------- timeouts
    # The commands here never end by themselves, so a result that says timed out is one the
    # timeout ended; how long killing and getting the shell back takes is measured by
    # benchmarks/bench_timeouts.py, not bounded here (a loaded machine makes it slow, not wrong).

    @pytest.mark.parametrize("command", ["sleep 1000", "yes > /dev/null", "while true; do sleep 0.1; done"])
    def test_timeout_kills_command_and_keeps_shell(self, sandbox: Sandbox, command: str) -> None:
        sandbox.shell("cd /tmp && export KEEP=kept")
        started = time.monotonic()
        result = sandbox.shell(command, timeout=1.0)
        assert result.timed_out and result.exit_code is None and not result.ok
        assert time.monotonic() - started >= 1.0  # not before its timeout
        assert sandbox.shell("echo usable").output == "usable\n"
        assert count_procs(sandbox, "yes") == 0 and count_procs(sandbox, "sleep") == 0  # killed, not left running

    def test_timeout_keeps_output_so_far(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("echo before; sleep 1000", timeout=1.0)
        assert result.timed_out
        assert result.output.startswith("before\n")

    def test_timeout_keeps_shell_state(self, sandbox: Sandbox) -> None:
        sandbox.shell("cd /tmp && export KEEP=kept")
        assert sandbox.shell("sleep 1000", timeout=1.0).timed_out
        assert sandbox.shell('pwd; echo "$KEEP"').output == "/tmp\nkept\n"

    def test_run_timeout(self, sandbox: Sandbox) -> None:
        result = sandbox.run("echo started; sleep 1000", timeout=1.0)
        assert result.timed_out and result.exit_code is None
        assert result.output.startswith("started")
        assert sandbox.run("echo fine").output == "fine\n"
        assert count_procs(sandbox, "sleep") == 0

    def test_stdin_does_not_hang(self, sandbox: Sandbox) -> None:
        # A command reading stdin gets end-of-file or is timed out: either way we get control back.
        for command in ("cat", "read -r line; echo \"got[$line]\"", "python3 -c 'import sys; sys.stdin.read()'"):
            result = sandbox.shell(command, timeout=2.0)
            assert result.timed_out or result.exit_code is not None, command
        # Whatever we send next is a command, not input swallowed by a reader.
        assert sandbox.shell("echo after-stdin").output == "after-stdin\n"
        result = sandbox.run("cat", timeout=2.0)
        assert result.timed_out or result.exit_code is not None

    # ---------------------------------------------------------------- persistence in the shell

    def test_cwd_and_env_persist(self, sandbox: Sandbox) -> None:
        sandbox.shell("mkdir -p /tmp/work/deep && cd /tmp/work/deep")
        sandbox.shell("export GREETING='hé llo'; LOCAL_ONLY=1")
        sandbox.shell("greet() { echo \"fn:$1\"; }; alias hi='echo alias-works'")
        result = sandbox.shell('pwd; echo "$GREETING|$LOCAL_ONLY"; greet x; hi; echo "[$#]"')
        assert result.output == "/tmp/work/deep\nhé llo|1\nfn:x\nalias-works\n[0]\n"

    def test_background_jobs_persist(self, sandbox: Sandbox) -> None:
        sandbox.shell("sleep 300 &")
        assert count_procs(sandbox, "sleep") == 1
        jobs = sandbox.shell("jobs")
        assert "sleep 300" in jobs.output
        assert sandbox.shell("kill %1; wait %1 2>/dev/null; echo waited").output.endswith("waited\n")
        assert count_procs(sandbox, "sleep") == 0

    def test_multiline_command_and_heredoc(self, sandbox: Sandbox) -> None:
        command = ("cat > /tmp/h.txt <<'EOF'\nline $HOME\nsecond\nEOF\nwc -l < /tmp/h.txt\n"
                   "for i in 1 2 3; do\n  echo -n $i\ndone\n")
        result = sandbox.shell(command)
        assert result.output == "2\n123"
        assert sandbox.read_file("/tmp/h.txt") == b"line $HOME\nsecond\n"

    # ---------------------------------------------------------------- run()

    def test_run_bash_args(self, sandbox: Sandbox) -> None:
        result = sandbox.run('printf "[%s]" "$@"; echo " n=$#"', args=("a b", "ü", "$HOME", ""))
        assert result.output == "[a b][ü][$HOME][] n=4\n"

    def test_run_python_args(self, sandbox: Sandbox) -> None:
        result = sandbox.run("import sys; print(sys.argv[1:])", language="python", args=("x", "y z", "é"))
        assert result.output == "['x', 'y z', 'é']\n"

    def test_run_is_root_outside_the_agent_shell(self, sandbox: Sandbox) -> None:
        sandbox.shell("export ONLY_IN_SHELL=1; cd /tmp")
        assert sandbox.run('echo "${ONLY_IN_SHELL:-unset}"').output == "unset\n"
        assert sandbox.run("id -u").output == "0\n"

    def test_run_sees_the_agent_files_and_processes(self, sandbox: Sandbox) -> None:
        sandbox.shell("echo from-shell > /root/shared.txt; sleep 300 &")
        assert sandbox.run("cat /root/shared.txt").output == "from-shell\n"
        assert count_procs(sandbox, "sleep") == 1
        sandbox.run("echo from-run > /tmp/by-run.txt")
        assert sandbox.shell("cat /tmp/by-run.txt").output == "from-run\n"

    # ---------------------------------------------------------------- reset and close

    def test_reset_restores_pristine_state(self, sandbox: Sandbox) -> None:
        before = {d: sandbox.shell(f"ls -A {d} | sort").output for d in ("/tmp", "/root")}
        sandbox.write_file("/tmp/episode.txt", b"1")
        sandbox.shell("echo 2 > /root/episode.txt; mkdir -p /root/.cache/x; export EPISODE_VAR=yes; cd /tmp")
        sandbox.shell("sleep 400 & sleep 401 &")
        sandbox.run("nohup sleep 402 >/dev/null 2>&1 &")
        assert count_procs(sandbox, "sleep") == 3
        sandbox.reset()
        for path in ("/tmp/episode.txt", "/root/episode.txt"):
            with pytest.raises(FileNotFoundError):
                sandbox.read_file(path)
        assert {d: sandbox.shell(f"ls -A {d} | sort").output for d in ("/tmp", "/root")} == before
        assert sandbox.shell('echo "${EPISODE_VAR:-gone}"').output == "gone\n"
        assert sandbox.shell("pwd").output != "/tmp\n"
        assert sandbox.shell("jobs").output == ""
        assert count_procs(sandbox, "sleep") == 0

    @staticmethod
    def reset_against_new(sandbox: Sandbox, sandbox_kind: str, view: str) -> str:
        """What ``view`` prints after a reset, checked equal to what it prints in a brand-new sandbox."""
        sandbox.reset()
        after_reset = sandbox.shell(view)
        with make_sandbox(sandbox_kind) as fresh:
            pristine = fresh.shell(view)
        assert after_reset.exit_code == 0 and pristine.exit_code == 0
        assert after_reset.output == pristine.output
        return after_reset.output

    def test_reset_matches_a_brand_new_sandbox(self, sandbox: Sandbox, sandbox_kind: str) -> None:
        sandbox.shell(DIRTY_EPISODE)
        assert count_procs(sandbox, "sleep") == 2
        self.reset_against_new(sandbox, sandbox_kind, FINGERPRINT)

    def test_reset_leaves_nothing_anywhere_the_agent_can_write(self, sandbox: Sandbox, sandbox_kind: str) -> None:
        # Everywhere root without mount rights can leave something for the next episode: every
        # writable tree (/etc too, with a changed mode and an extended attribute on a dir),
        # /dev/shm, System V IPC, and daemons started by the shell and by run().
        hostile = r"""
        echo 'intruder:x:0:0::/root:/bin/bash' >> /etc/passwd; echo x > /etc/planted; chmod 700 /etc/ssl
        sed -i 's/root/ROOT/' /etc/group; chmod 600 /etc/hosts; ln /etc/hostname /etc/hostname-link
        mkdir -p /run/r /var/log/l /var/lib/x && echo 1 > /run/r/f && echo 2 > /var/log/l/f
        echo 3 > /dev/shm/planted; ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null
        python3 -c "import os; [os.setxattr(p, 'user.planted', b'1') for p in ('/etc/ssl', '/etc/shells')]"
        chmod 600 /dev/pts/ptmx 2>/dev/null; chown 1:1 /dev/pts/ptmx 2>/dev/null
        (setsid sleep 600 >/dev/null 2>&1 < /dev/null &)
        """
        view = r"""
        stat -c '%a %u' /dev/pts/ptmx 2>/dev/null || echo no ptmx
        find /etc /run /var /dev/shm -xdev -printf '%p %M %s\n' 2>/dev/null | sort | md5sum
        find /etc -xdev -type f -exec md5sum {} + | sort | md5sum; find /etc -xdev -type f -links +1 | wc -l
        ls /dev/shm | wc -l; ipcs -m | grep -c '^0x'; ipcs -q | grep -c '^0x'
        python3 -c "import os; print([os.listxattr(p) for p in ('/etc/ssl', '/etc/shells')])"
        """
        sandbox.shell(hostile)
        sandbox.run("nohup sleep 601 >/dev/null 2>&1 &")
        assert count_procs(sandbox, "sleep") == 2
        assert sandbox.shell("ls /dev/shm; ipcs -m | grep -c '^0x'").output.split() == ["planted", "1"]
        after_reset = self.reset_against_new(sandbox, sandbox_kind, view)
        assert after_reset.splitlines()[3:] == ["0", "0", "0", "0", "[[], []]"]
        assert count_procs(sandbox, "sleep") == 0

    def test_the_agent_holds_dockers_capabilities_only(self, sandbox: Sandbox) -> None:
        # CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID NET_BIND_SERVICE AUDIT_WRITE:
        # no mounting, no network or hostname changes, in the shell and in run() alike.
        # With no_new_privs, no exec can add to them (setuid files and file capabilities included).
        expected = sum(1 << bit for bit in (0, 1, 3, 4, 5, 6, 7, 10, 29))
        caps = "grep -E '^(CapPrm|CapEff|NoNewPrivs)' /proc/self/status | awk '{print $2}'"
        for output in (sandbox.shell(caps).output, sandbox.run(caps).output):
            assert [int(x, 16) for x in output.split()] == [expected, expected, 1]
        denied = sandbox.shell("mount -t tmpfs none /tmp 2>&1; echo $?; hostname other 2>&1; echo $?; hostname")
        lines = denied.output.splitlines()
        assert lines[-1] != "other" and "0" not in (lines[1], lines[-2])

    def test_reset_is_repeatable(self, sandbox: Sandbox) -> None:
        for i in range(3):
            sandbox.shell(f"echo {i} > /tmp/n.txt")
            assert sandbox.read_file("/tmp/n.txt") == f"{i}\n".encode()
            sandbox.reset()
            assert sandbox.shell("test -e /tmp/n.txt; echo $?").output == "1\n"

    def test_close_is_idempotent(self, sandbox_kind: str) -> None:
        other = make_sandbox(sandbox_kind)
        with other:
            assert other.shell("echo up").output == "up\n"
        other.close()
        other.close()

    # ---------------------------------------------------------------- isolation from the host

    def test_host_canary_files_are_not_visible(self, sandbox: Sandbox) -> None:
        name = f"agentunit-canary-{secrets.token_hex(6)}"
        planted = [d / name for d in HOST_CANARY_DIRS]
        for path in planted:
            path.write_text("host secret\n")
        try:
            for path in planted:
                read = sandbox.shell(f"cat {path}")
                assert read.exit_code != 0 and "host secret" not in read.output, path
                assert name not in sandbox.shell(f"ls -a {path.parent}").output, path
                with pytest.raises(FileNotFoundError):
                    sandbox.read_file(str(path))
                assert sandbox.run(f"cat {path}").exit_code != 0
            found = sandbox.shell(f"find / -name '{name}*' 2>/dev/null | head -5; echo end", timeout=60)
            assert found.output == "end\n"
        finally:
            for path in planted:
                path.unlink(missing_ok=True)

    def test_host_processes_are_not_visible(self, sandbox: Sandbox) -> None:
        name = f"agentunit-host-{secrets.token_hex(6)}"
        host = subprocess.Popen(["bash", "-c", f'exec -a {name} sleep 300'], start_new_session=True)
        try:
            listing = sandbox.shell("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; "
                                    "ls /proc | grep -c '^[0-9]'")
            assert name not in listing.output
            assert int(listing.output.split()[-1]) < 20  # the sandbox's own few processes only
            assert sandbox.shell(f"kill -9 {os.getpid()} 2>/dev/null; echo alive").output == "alive\n"
        finally:
            host.kill()
            host.wait()

    def test_kernel_keyrings_never_reach_the_host_and_what_a_reset_keeps(self, sandbox: Sandbox,
                                                                          sandbox_kind: str) -> None:
        # Keys are not namespaced like files: a uid's user keyring is per user namespace. Docker's
        # seccomp profile refuses the key syscalls outright (its root is the host's root); the
        # local box has a user namespace of its own, which a reset in place keeps, so a key the
        # agent adds to its user keyring is seen by the next episode of the same sandbox
        # (documented in docs/sandbox-local.md) and never by the host.
        name = f"agentunit-key-{secrets.token_hex(6)}"
        added = sandbox.run(KEYRING_PROBE, language="python", args=("add", name), timeout=30).output.split()
        sandbox.reset()
        found = sandbox.run(KEYRING_PROBE, language="python", args=("find", name), timeout=30).output.split()
        on_host = _keyring_search(name)
        assert on_host == "errno 126", on_host  # ENOKEY: the host's user keyring never has it
        if sandbox_kind == "docker":
            assert added == ["errno", "1"] and found == ["errno", "1"]  # EPERM: seccomp
        else:
            assert added[0] == "added" and found[0] == "found", (added, found)

    # ---------------------------------------------------------------- runaway processes

    # A bomb that a quiet background job starts later is also caught (after the next command),
    # but its test ("(sleep 0.5; bomb) &") failed once in ~10 runs on local-unshare under load
    # (a later command's exit status): left out until that is understood.
    @pytest.mark.parametrize("bomb", [FORK_BOMB, f"{FORK_BOMB}; sleep 100"], ids=["returns", "times-out"])
    def test_fork_bomb_then_commands_answer(self, sandbox: Sandbox, bomb: str) -> None:
        sandbox.shell("sleep 300 &")  # a deliberate background job of an earlier command survives
        result = sandbox.shell(bomb, timeout=3.0)
        if bomb.startswith("("):
            # One quiet background job: left alone. It turns into a bomb during the next command,
            # which finds it among what appeared since the last check.
            assert "killed" not in result.output
            result = sandbox.shell("sleep 1.5; echo waited", timeout=5.0)
            assert "waited" in result.output
        assert result.timed_out if "sleep 100" in bomb else "killed" in result.output
        # Each of three ordinary commands answers within 2 s (its timeout is the deadline).
        for command, expected in (("echo one", "one\n"), ("printf '%s\\n' two", "two\n"),
                                  ("ls /usr >/dev/null && echo three", "three\n")):
            answer = sandbox.shell(command, timeout=2.0)
            assert not answer.timed_out and answer.exit_code == 0, (command, answer.output[-300:])
            assert answer.output.endswith(expected), (command, answer.output[-300:])
            assert "fork: retry" not in answer.output  # what the killed bomb printed was dropped
        assert count_procs(sandbox, "sleep") == 1
        assert count_procs(sandbox, "bash") <= 3

    def test_background_jobs_within_budget_survive(self, sandbox: Sandbox) -> None:
        result = sandbox.shell("for i in 1 2 3 4; do sleep 30$i & done; (sleep 0.2; sleep 400) &")
        assert "killed" not in result.output
        assert sandbox.shell("sleep 0.5; echo ok").output.endswith("ok\n")
        assert count_procs(sandbox, "sleep") == 5

    def test_the_start_script_is_not_watched_for_a_flood(self, sandbox_kind: str) -> None:
        # Past the budget from the task's start script (shell_setup): left running, as a one-off
        # command's would be. The same from the agent's command is a flood, and what the start
        # script left is not counted in it.
        options: dict[str, Any] = {"pool_size": 0} if sandbox_kind == "docker" else {"warm_spare": False}
        with make_sandbox(sandbox_kind, runaway_budget=4, **options) as sandbox:
            started = sandbox.shell_setup("for i in 1 2 3 4 5 6; do sleep 30$i & done; disown -a; echo started")
            assert started.output.endswith("started\n") and "killed" not in started.output, started
            assert count_procs(sandbox, "sleep") == 6
            assert sandbox.shell("echo ok").output == "ok\n"
            flood = sandbox.shell("for i in 1 2 3 4 5 6; do sleep 40$i & done")
            assert "killed" in flood.output, flood
            assert sandbox.run("ps -eo args | grep -c '^sleep 30[1-6]$'").output == "6\n"  # the first six
            assert count_procs(sandbox, "sleep") == 6


    # ---------------------------------------------------------------- network (opt-in)

    def test_network_is_opt_in(self, sandbox: Sandbox, sandbox_kind: str) -> None:
        # A listener on the host: unreachable by default, reachable with network=True.
        with socket.create_server(("0.0.0.0", 0)) as server:
            port = server.getsockname()[1]
            server.settimeout(20)
            probe = ("import socket, sys\n"
                     "for host in sys.argv[1:]:\n"
                     "    try:\n"
                     "        socket.create_connection((host, int(PORT)), timeout=3).close()\n"
                     "        print('connected'); break\n"
                     "    except OSError as exc:\n"
                     "        print('failed', host, type(exc).__name__)\n").replace("PORT", str(port))
            targets = ("127.0.0.1",)
            assert "connected" not in sandbox.run(probe, language="python", args=targets).output
            with make_sandbox(sandbox_kind, network=True) as online:
                # Docker's bridge reaches the host at the default route's gateway; local shares the host's loopback.
                gateway = online.run("awk '$2 == \"00000000\" {print $3}' /proc/net/route").output.split()
                hosts = [*targets, *(socket.inet_ntoa(bytes.fromhex(g)[::-1]) for g in gateway[:1])]
                result = online.run(probe, language="python", args=tuple(hosts), timeout=30)
                assert "connected" in result.output, result.output
                server.accept()[0].close()

    def test_a_background_server_answers_on_loopback(self, sandbox: Sandbox) -> None:
        sandbox.shell("python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &")
        fetch = ("for i in $(seq 50); do python3 -c \"import urllib.request as u; "
                 "print(u.urlopen('http://127.0.0.1:8765/').status)\" 2>/dev/null && break; sleep 0.1; done")
        assert sandbox.shell(fetch, timeout=30).output.endswith("200\n")
        assert "http.server" in sandbox.shell("jobs").output

    # ---------------------------------------------------------------- the agent's process view

    def test_process_view_is_a_plain_containers(self, sandbox: Sandbox) -> None:
        # As in `docker run IMAGE bash` after the same init script: the shell is PID 1, the
        # init's daemons are visible, nothing of the sandbox's own machinery is (compared with a
        # real `docker run` in test_docker_sandbox.py).
        sandbox.run("sleep 1000 >/dev/null 2>&1 & (setsid sleep 1001 >/dev/null 2>&1 &)")
        # run() returns when its bash exits: the daemons may still be on their way to exec sleep.
        deadline = time.monotonic() + 10
        while count_procs(sandbox, "sleep") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sandbox.shell("echo $$").output == "1\n"
        # ps alone, into a file: in a pipeline it races the pipeline's other members being started.
        listing = sandbox.shell("ps -A -o comm= > /tmp/ps.txt; ps -A > /tmp/psa.txt; sort /tmp/ps.txt | tr '\\n' ' '; "
                                "echo; wc -l < /tmp/psa.txt").output
        assert listing.split() == ["bash", "ps", "sleep", "sleep", "5"]

    def test_find_from_the_root_exits_0(self, sandbox: Sandbox) -> None:
        # A gold solution of AgentBench: nothing the agent's root meets may be unreadable.
        sandbox.run("sleep 1000 >/dev/null 2>&1 &")
        found = sandbox.shell("find / -name no-such-file-anywhere", timeout=120)
        assert (found.exit_code, found.output) == (0, "")
        assert "Permission denied" not in sandbox.shell("find / -name no-such 2>&1; ls -R /proc/1 /proc/tty >/dev/null",
                                                        timeout=120).output

    # ---------------------------------------------------------------- shells that nest

    def test_a_nested_shell_takes_over_until_exit(self, sandbox: Sandbox) -> None:
        # As in a terminal: the next commands run in the shell a command started; `exit` returns.
        sandbox.shell("mkdir -p /tmp/outer && cd /tmp/outer && export OUTER=kept && OUTER_ONLY=1")
        level = int(sandbox.shell("echo $SHLVL").output)
        started = sandbox.shell("bash", timeout=10)
        assert (started.output, started.exit_code, started.timed_out) == ("", 0, False)
        inner = sandbox.shell('echo "$SHLVL $OUTER [${OUTER_ONLY-}]"; pwd; cd /tmp; INNER=1')
        assert inner.output == f"{level + 1} kept []\n/tmp/outer\n"
        assert sandbox.shell("(exit 5)").exit_code == 5
        assert sandbox.shell('echo "$INNER"; pwd').output == "1\n/tmp\n"
        # Two levels deep: sh in that bash, with its own exit codes.
        assert sandbox.shell("sh", timeout=10).exit_code == 0
        deep = sandbox.shell('echo "$0 $INNER"; false')
        assert (deep.output, deep.exit_code) == ("sh \n", 1)
        assert sandbox.shell("exit 4").exit_code == 4  # back in bash: its status is sh's
        assert sandbox.shell('echo "$SHLVL $INNER"; pwd').output == f"{level + 1} 1\n/tmp\n"
        assert sandbox.shell("exit 3").exit_code == 3
        outer = sandbox.shell('echo "$SHLVL $OUTER $OUTER_ONLY [${INNER-}]"; pwd')
        assert outer.output == f"{level} kept 1 []\n/tmp/outer\n"

    def test_a_login_shell_nests_too(self, sandbox: Sandbox) -> None:
        sandbox.shell("cd /tmp")
        assert sandbox.shell("bash --login", timeout=10).exit_code == 0
        inner = sandbox.shell("shopt -q login_shell && echo login; pwd")
        assert inner.output == "login\n/tmp\n"
        assert sandbox.shell("exit 2").exit_code == 2
        assert sandbox.shell("shopt -q login_shell || echo not-login; pwd").output == "not-login\n/tmp\n"

    @pytest.mark.parametrize("command", ["sleep 100", "cat", "while :; do :; done"])
    def test_timeout_in_a_nested_shell_keeps_that_shell(self, sandbox: Sandbox, command: str) -> None:
        sandbox.shell("export OUTER=kept")
        assert sandbox.shell("sh", timeout=10).exit_code == 0
        sandbox.shell("cd /tmp; INNER=1")
        result = sandbox.shell(command, timeout=1.0)
        assert result.timed_out and result.exit_code is None
        assert sandbox.shell('echo "$0 $INNER"; pwd').output == "sh 1\n/tmp\n"
        assert sandbox.shell("exit").exit_code == 0
        assert sandbox.shell('echo "$0 [${INNER-}] $OUTER"').output.endswith(" [] kept\n")

    def test_a_nested_shell_that_ignores_ctrl_c_is_ended(self, sandbox: Sandbox) -> None:
        sandbox.shell("cd /tmp; export OUTER=kept")
        assert sandbox.shell("bash", timeout=10).exit_code == 0
        result = sandbox.shell("trap '' INT; while :; do :; done", timeout=1.0)
        assert result.timed_out and "back in the shell that started it" in result.output
        after = sandbox.shell('echo "$OUTER $SHLVL"; pwd')
        assert after.output.endswith("\n/tmp\n") and after.output.startswith("kept ")
        assert sandbox.shell("echo in-step").output == "in-step\n"  # no stale line of ours is run

    def test_exit_from_the_outermost_shell_gives_a_fresh_one(self, sandbox: Sandbox) -> None:
        sandbox.shell("cd /tmp; export GONE=1")
        result = sandbox.shell("exit 6")
        assert result.exit_code == 6 and not result.timed_out
        assert "a new shell was started" in result.output
        assert sandbox.shell('echo "[${GONE-}]"; echo $$').output == "[]\n1\n"

    def test_su_switches_user_until_exit(self, sandbox: Sandbox, sandbox_kind: str) -> None:
        sandbox.run("useradd -m -s /bin/bash jack")
        sandbox.shell("cd /tmp; export OUTER=kept")
        if not sandbox.multi_user:
            # One uid is mapped (a local sandbox not started by root): su fails (exits 1, no
            # timeout: it does not wait for a password), and says why.
            result = sandbox.shell("su - jack", timeout=10)
            assert result.exit_code == 1 and not result.timed_out
            assert "switching users needs the docker sandbox" in result.output
            assert sandbox.shell("whoami").output == "root\n"
            return
        for command, shell_name, home in (("su - jack", "-bash", "/home/jack"), ("su jack", "bash", "/tmp")):
            started = sandbox.shell(command, timeout=10)
            assert (started.output, started.exit_code) == ("", 0)
            inner = sandbox.shell('whoami; echo "$0"; pwd; cd /; ls /root')
            assert inner.output.startswith(f"jack\n{shell_name}\n{home}\n") and inner.exit_code == 2
            assert sandbox.shell("exit").exit_code == 2
            assert sandbox.shell('whoami; pwd; echo "$OUTER"').output == "root\n/tmp\nkept\n"
        # useradd's default shell is sh (dash): it nests the same way.
        sandbox.run("useradd -m jill")
        assert sandbox.shell("su - jill", timeout=10).exit_code == 0
        assert sandbox.shell('whoami; echo "$0"; false').output == "jill\n-sh\n"
        assert sandbox.shell("exit").exit_code == 1
        assert sandbox.shell("whoami").output == "root\n"

    # ---------------------------------------------------------------- resource limits (issue 23)
    # One small sandbox per kind (LIMITS): the memory bombs and the disk fill stay far below
    # what the shared machine has, and what they leave is the limit's doing, not the host's.

    @pytest.fixture(scope="class")
    @classmethod
    def limited_instance(cls, sandbox_kind: str) -> Iterator[Sandbox]:
        options: dict[str, Any] = {"pool_size": 0} if sandbox_kind == "docker" else {"warm_spare": False}
        sandbox = make_sandbox(sandbox_kind, **LIMITS, **options)
        sandbox.start()
        yield sandbox
        sandbox.close()

    @pytest.fixture
    def limited(self, limited_instance: Sandbox) -> Sandbox:
        limited_instance.reset()
        off = limited_instance.limits_off
        if off:  # a local sandbox on a host that gives it no cgroup or no tmpfs mount (not root)
            skip_without_cgroup(f"limits off on this host: {off}")
        return limited_instance

    @pytest.mark.slow
    @pytest.mark.parametrize("bomb", [
        "head -c 3G /dev/zero | tail",
        "python3 -c 'x = bytearray(b\"a\") * (3 << 30)'",
    ], ids=["pipeline", "python"])
    def test_a_memory_bomb_kills_only_the_command(self, limited: Sandbox, bomb: str) -> None:
        limited.shell("cd /tmp; export KEPT=yes")
        result = limited.shell(bomb, timeout=60)
        assert result.exit_code == 137 and not result.timed_out, result
        note = result.output.splitlines()[-1]
        assert note == "[killed: the command went over the sandbox's memory limit (256 MiB)]"
        # The same shell goes on: its cwd and variables are there, the next command works.
        after = limited.shell('pwd; echo "$KEPT"; echo $((6*7))')
        assert after.exit_code == 0 and after.output == "/tmp\nyes\n42\n"
        assert "a new shell was started" not in result.output + after.output

    def test_a_command_that_exits_137_by_itself_gets_no_memory_note(self, limited: Sandbox) -> None:
        result = limited.shell("sh -c 'kill -9 $$'")
        assert result.exit_code == 137 and "memory limit" not in result.output

    @pytest.mark.slow
    def test_a_disk_fill_is_enospc_and_reset_gives_the_space_back(self, limited: Sandbox) -> None:
        result = limited.shell("dd if=/dev/zero of=/root/fill bs=1M count=3072", timeout=60)
        assert result.exit_code == 1 and "No space left on device" in result.output, result
        assert limited.shell("echo next").output == "next\n"
        # Everything writable shares the one bound: /tmp is full too, and the box still works.
        assert "No space left on device" in limited.shell("echo x > /tmp/more").output
        size = int(limited.shell("stat -c %s /root/fill").output)
        assert 60 << 20 <= size <= 64 << 20
        limited.reset()
        again = limited.shell("dd if=/dev/zero of=/root/fill bs=1M count=48 2>&1 && echo wrote", timeout=60)
        assert again.output.endswith("wrote\n"), again

    def test_the_agents_processes_are_the_oom_killers_choice(self, limited: Sandbox) -> None:
        # The shell, its commands and one-off commands: AGENT_OOM_SCORE_ADJ, above the
        # supervisor's or the holder's 0; lowering it again takes a privilege the agent lacks.
        assert limited.shell("cat /proc/$$/oom_score_adj /proc/self/oom_score_adj").output.split() == ["500", "500"]
        assert limited.run("cat /proc/self/oom_score_adj").output == "500\n"
        assert limited.shell("echo -1000 > /proc/$$/oom_score_adj").exit_code != 0

    @pytest.mark.slow
    def test_a_fork_bomb_stops_at_the_pids_limit_and_the_box_survives(self, limited: Sandbox) -> None:
        # Processes started one by one until the kernel refuses: EAGAIN below the pids limit.
        word, started, *errno = limited.run(SPAWN_UNTIL_REFUSED, language="python", timeout=30).output.split()
        assert word == "refused" and errno == ["11"], (word, started, errno)
        assert LIMITS["pids_limit"] // 2 < int(started) < LIMITS["pids_limit"]
        # A fork bomb in the agent's shell: it hits the same limit, the box and its shell go on.
        limited.shell("cd /tmp")
        limited.shell(FORK_BOMB, timeout=5)
        assert limited.shell("pwd; echo alive").output.endswith("/tmp\nalive\n")
        # What was left of the bomb was killed: killed copies may still be exiting or waiting to
        # be reaped for a moment (a live one would keep the count up past the deadline).
        deadline = time.monotonic() + 10
        while (left := count_procs(limited, "bash")) > 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left <= 3, left
        limited.reset()
        assert limited.shell("echo fresh").output == "fresh\n"

    @pytest.mark.slow
    def test_what_a_command_that_reached_the_pids_limit_left_is_killed(self, limited: Sandbox) -> None:
        # A bomb touches the limit for a moment, then its copies sleep in bash's fork retries,
        # fewer than any count calls a flood and standing still: the refused fork tells.
        result = limited.shell(TOUCH_THE_LIMIT_LEAVE_THREE)
        assert result.output.startswith("left 3\n") and "killed as a fork bomb" in result.output, result
        assert count_procs(limited, "sleep") == 0
        # A one-off command's own refused forks are its own: a later deliberate job survives.
        assert limited.run(SPAWN_UNTIL_REFUSED, language="python", timeout=30).output.startswith("refused ")
        result = limited.shell("sleep 300 & sleep 300 &")
        assert "killed" not in result.output, result
        assert count_procs(limited, "sleep") == 2

    @pytest.mark.slow
    def test_a_job_that_fills_the_pids_limit_after_its_command_does_not_stop_one_off_commands(
            self, limited: Sandbox) -> None:
        # Two processes standing still when the command ends (deliberate, as far as anyone can
        # tell then); half a second later they fill the pids limit and stay there, retrying.
        started = limited.shell(FILL_THE_LIMIT_LATER)
        assert started.exit_code == 0 and "killed" not in started.output, started
        time.sleep(3)
        # A one-off command (the evaluation's check) still runs: the box is cleared for it first.
        assert limited.run("echo ok").output == "ok\n"
        assert count_procs(limited, "sleep") == 0
        assert limited.shell("echo alive").output == "alive\n"

    @pytest.fixture(scope="class")
    @classmethod
    def throttled_instance(cls, sandbox_kind: str) -> Iterator[Sandbox]:
        options: dict[str, Any] = {"pool_size": 0} if sandbox_kind == "docker" else {"warm_spare": False}
        sandbox = make_sandbox(sandbox_kind, **dict(LIMITS, cpus=0.1), runaway_budget=8, **options)
        sandbox.start()
        yield sandbox
        sandbox.close()

    @pytest.mark.slow
    def test_a_spawner_held_still_by_the_cpu_limit_is_still_a_flood(self, throttled_instance: Sandbox) -> None:
        sandbox = throttled_instance
        sandbox.reset()
        if sandbox.limits_off:
            skip_without_cgroup(f"limits off on this host: {sandbox.limits_off}")
        # Four processes, then one more every 10 ms of CPU: at cpus=0.1, one every CFS period
        # (100 ms), the box held still in between and for the interpreter's start.
        result = sandbox.shell(SLOW_SPAWNER)
        assert "were killed as a fork bomb: more than 8 still forking" in result.output, result
        assert (count_procs(sandbox, "python3"), count_procs(sandbox, "sleep")) == (0, 0)
        assert sandbox.shell("echo alive").output == "alive\n"

    @pytest.mark.slow
    def test_cpu_time_is_bounded_by_cpus(self, limited: Sandbox) -> None:
        # Two busy processes for 1.5 s of wall time: at most cpus (0.5) x 1.5 s of CPU between
        # them, where two free cores would give them up to 3 s.
        result = limited.run(BUSY_TWO_FOR_1_5_S, language="python", timeout=30)
        assert result.exit_code == 0, result
        assert float(result.output) <= LIMITS["cpus"] * 1.5 * 1.4, result.output
