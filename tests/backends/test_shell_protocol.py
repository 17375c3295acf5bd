"""The shell protocol shared by the docker supervisor and the local sandbox (images/os/shell_protocol.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentunit_gym.backends.sandbox import docker
from agentunit_gym.images.os import shell_protocol
from agentunit_gym.images.os.shell_protocol import (
    PENDING_CAP,
    RUNAWAY_THROTTLED_WATCH_S,
    Capture,
    Level,
    at_pids_limit,
    is_flood,
    new_nonce,
    settle,
    waiting_nonces,
)

OS_IMAGE = Path(shell_protocol.__file__).parent


def sentinel(nonce: str, status: int) -> bytes:
    return b"\x1eAU" + nonce.encode() + b":" + str(status).encode() + b"\x1e"


def test_a_sentinel_split_across_reads_is_found_and_stripped() -> None:
    nonce = new_nonce()
    data = b"hello\n" + sentinel(nonce, 3) + b"[1]+ Done"
    end = data.index(b"[1]")
    for cut in range(1, len(data)):
        cap = Capture(1 << 10, {nonce})
        cap.feed(data[:cut])
        if cap.found is None:
            cap.feed(data[cut:])
        # What came with the sentinel's read is kept for the next command; later reads are its own.
        after = data[end:cut] if cut >= end else data[end:]
        assert (cap.found, cap.found_nonce, bytes(cap.kept), cap.after) == (3, nonce, b"hello\n", after), cut


def test_a_sentinel_of_another_nonce_is_output() -> None:
    ours, other = new_nonce(), new_nonce()
    cap = Capture(1 << 10, {ours})
    cap.feed(b"a" + sentinel(other, 0) + b"b")
    assert cap.found is None
    cap.feed(sentinel(ours, 0))
    assert cap.found == 0 and bytes(cap.kept) == b"a" + sentinel(other, 0) + b"b"


def test_output_past_the_limit_is_counted_not_kept() -> None:
    nonce = new_nonce()
    cap = Capture(4, {nonce})
    cap.feed(b"0123456789" + sentinel(nonce, 0) + b"x" * (PENDING_CAP + 10))
    assert (bytes(cap.kept), cap.total, cap.truncated, len(cap.after)) == (b"0123", 10, True, PENDING_CAP)


def test_a_held_back_tail_is_output_when_no_sentinel_comes() -> None:
    cap = Capture(100, {new_nonce()})
    cap.feed(b"abc\x1eA")
    assert bytes(cap.kept) == b"abc"
    cap.finish()
    assert bytes(cap.kept) == b"abc\x1eA" and cap.total == 5


@pytest.mark.parametrize("name", ["bash", "sh"])
def test_a_line_never_holds_its_own_sentinel(name: str) -> None:
    nonce = new_nonce()
    line = Level(42, name).line("printf 'x\\036'; echo '$?'", nonce)
    assert line.endswith("\n") and line.count("\n") == 1 and "\x1e" not in line and nonce in line
    # Run by the shell, it prints exactly the sentinel after the command's output.
    out = subprocess.run([f"/bin/{name}"], input=line.encode(), capture_output=True, timeout=10).stdout
    cap = Capture(100, {nonce})
    cap.feed(out)
    assert cap.found == 0 and bytes(cap.kept) == b"x\x1e$?\n"


def test_a_failed_status_is_restored_for_the_next_line() -> None:
    level = Level(42, "bash")
    level.status = 3
    nonce = new_nonce()
    out = subprocess.run(["/bin/bash"], input=level.line("echo $?", nonce).encode(), capture_output=True,
                         timeout=10).stdout
    assert out.startswith(b"3\n")


def test_settle_drops_the_shells_above_the_line_that_reported() -> None:
    levels = [Level(1, "driver"), Level(2, "bash"), Level(3, "sh")]
    levels[0].waiting, levels[1].waiting = "n0", "n1"
    assert waiting_nonces(levels) == ["n0", "n1"]
    settle(levels, "n1", 5)  # the sh exited: bash's line reported with its status
    assert [level.pid for level in levels] == [1, 2] and levels[1].waiting is None and levels[1].status == 5
    settle(levels, "other", 300)  # the top shell's own line; an out-of-range status counts as 0
    assert [level.pid for level in levels] == [1, 2] and levels[1].status == 0
    settle(levels, "n0", 0)
    assert [level.pid for level in levels] == [1]


def test_is_flood_tells_a_bomb_from_a_few_jobs() -> None:
    growing = iter(range(1, 1000))
    assert is_flood(lambda: next(growing), before=2, budget=32, pids_limit=512)
    assert not is_flood(lambda: 3, before=2, budget=32, pids_limit=512)  # stable: deliberate jobs
    assert not is_flood(lambda: 0, before=2, budget=32, pids_limit=512)
    assert is_flood(lambda: 5, before=460, budget=32, pids_limit=512)  # near the pids limit


def test_a_bomb_held_still_by_a_cpu_limit_is_still_a_flood() -> None:
    # Under cpus= the kernel holds the whole box still for most of a 100 ms CFS period: a bomb
    # at 7 processes stands still for 90 ms, then doubles on. (Three looks 15 ms apart took it
    # for a few deliberate jobs, and the bomb held the pids limit until the next reset.)
    start = time.monotonic()

    def throttled() -> int:
        elapsed = time.monotonic() - start
        return 7 if elapsed < 0.09 else 7 * 2 ** int((elapsed - 0.09) / 0.005 + 1)

    assert is_flood(throttled, before=1, budget=32, pids_limit=64)


def test_a_bomb_held_still_for_many_periods_is_a_flood_while_the_box_is_throttled() -> None:
    # A loaded machine may hold a throttled box still for several CFS periods: 6 processes
    # standing still for 0.6 s (past the 0.15 s still time and the 0.5 s watch), then growing on.
    start = time.monotonic()

    def count() -> int:
        elapsed = time.monotonic() - start
        return 6 if elapsed < 0.6 else 6 + int((elapsed - 0.6) / 0.01)

    def periods() -> int:  # the cgroup's nr_throttled: one more every 100 ms
        return int((time.monotonic() - start) / 0.1)

    assert not is_flood(count, before=1, budget=16, pids_limit=512)  # as judged without the counter
    start = time.monotonic()
    assert is_flood(count, before=1, budget=16, pids_limit=512, throttled=periods)


def test_a_throttled_box_is_watched_two_seconds_at_most_and_a_few_jobs_not_at_all() -> None:
    periods = iter(range(1, 10**6))
    start = time.monotonic()
    # Ten CPU-bound jobs that never grow, in a box throttled all along: deliberate, once the
    # longest watch is over (not before: a bomb could be held still that long).
    assert not is_flood(lambda: 10, before=1, budget=32, pids_limit=512, throttled=lambda: next(periods))
    assert RUNAWAY_THROTTLED_WATCH_S <= time.monotonic() - start < RUNAWAY_THROTTLED_WATCH_S + 0.5
    # Up to a quarter of the budget (a server and a worker) is judged on the still time alone.
    start = time.monotonic()
    assert not is_flood(lambda: 8, before=1, budget=32, pids_limit=512, throttled=lambda: next(periods))
    assert time.monotonic() - start < 0.4


def test_a_fork_the_pids_limit_refused_makes_what_the_command_left_a_flood() -> None:
    # A bomb touched the limit between two looks: its copies then stand still in bash's fork
    # retries, 20 of them (below the budget and the limit), which alone looks deliberate.
    start = time.monotonic()

    def refused() -> int:  # the pids limit refused a fork 50 ms into the watch
        return 1 if time.monotonic() - start > 0.05 else 0

    assert not is_flood(lambda: 20, before=2, budget=32, pids_limit=64)
    start = time.monotonic()
    assert is_flood(lambda: 20, before=2, budget=32, pids_limit=64, refused=refused)
    # A refusal with nothing left (the command hit the limit and cleaned up) is no flood.
    assert not is_flood(lambda: 0, before=2, budget=32, pids_limit=64, refused=lambda: 3)


def test_a_box_at_its_pids_limit_is_full_at_nine_tenths() -> None:
    assert [at_pids_limit(n, 64) for n in (56, 57, 64)] == [False, True, True]
    assert not at_pids_limit(459, 512) and at_pids_limit(460, 512)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", ["shell_protocol.py", "shell_driver.py", "supervisor.py"])
def test_the_container_side_is_standard_library_only(name: str) -> None:
    # The image has python3 and nothing else of ours; the supervisor may import the shipped
    # modules only, the driver the protocol only.
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    ours = {"supervisor.py": {name for _, name, _ in docker.SHIPPED_MODULES},
            "shell_driver.py": {"agentunit_gym.images.os.shell_protocol"}}.get(name, set())
    assert {mod for mod in _imports(OS_IMAGE / name) if mod.split(".")[0] not in stdlib} <= ours


def test_the_boot_line_gives_the_supervisor_the_protocol_without_the_package(tmp_path: Path) -> None:
    # As in the container: a bare python3, without agentunit_gym importable.
    stub = ("from agentunit_gym.images.os.shell_protocol import Capture, new_nonce\n"
            "from agentunit_gym.images.os.shell_driver import Report, ShellDriver\n"
            "import sys\nprint(__name__, Capture.__module__, ShellDriver.__module__, len(new_nonce()),\n"
            "      Report(Capture(1), 0, False).ended, 'agentunit_gym' in sys.modules)\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AU_SUPERVISOR": stub,
           **{var: source.read_text() for var, _, source in docker.SHIPPED_MODULES}}
    out = subprocess.run([sys.executable, "-I", "-c", docker._BOOT], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)
    assert out.stdout == ("__main__ agentunit_gym.images.os.shell_protocol agentunit_gym.images.os.shell_driver 16 "
                          "None False\n"), out.stderr
