"""How long a command that times out keeps the caller: the wall-clock bounds the conformance
tests held before (a timed-out command returns within its timeout + KILL_SLACK_S), measured
here instead, where a loaded machine makes a number slow rather than a test red.

For each sandbox kind (local; docker when a daemon answers), a command that never ends by
itself, given ``timeout=1``: in the agent's shell (``sleep 1000``; ``cat``, which would read
its stdin; in a nested ``sh``), and as a one-off (``run``). The time is from the call to its
return: the timeout, then killing the command and getting the shell back. Baseline in the
same run: ``subprocess.run(["bash", "-c", "sleep 1000"], timeout=1)`` on the host, which
only kills one process. Reported: medians, and each case's median over the baseline's.

Usage: ``python benchmarks/bench_timeouts.py [--repeat N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timing import summary, timed, write_result

from agentunit_gym.backends.process import docker_available
from agentunit_gym.backends.sandbox.base import Sandbox

TIMEOUT_S = 1.0


def host_baseline() -> None:
    try:
        subprocess.run(["bash", "-c", "sleep 1000"], timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return
    raise AssertionError("the baseline command ended by itself")


def cases(sandbox: Sandbox) -> dict[str, Callable[[], None]]:
    def shell(command: str) -> Callable[[], None]:
        def once() -> None:
            assert sandbox.shell(command, timeout=TIMEOUT_S).timed_out

        return once

    def nested() -> None:
        sandbox.shell("sh")
        assert sandbox.shell("sleep 1000", timeout=TIMEOUT_S).timed_out
        sandbox.shell("exit")

    def one_off() -> None:
        assert sandbox.run("sleep 1000", timeout=TIMEOUT_S).timed_out

    return {"shell sleep": shell("sleep 1000"), "shell cat (stdin)": shell("cat"), "nested sh sleep": nested,
            "run sleep": one_off}


def open_kind(kind: str) -> Sandbox:
    if kind == "docker":
        from agentunit_gym.backends.sandbox.docker import DockerSandbox

        return DockerSandbox()
    from agentunit_gym.backends.sandbox.local import LocalSandbox

    return LocalSandbox(warm_spare=False)


def bench(repeat: int) -> dict[str, Any]:
    kinds = ["local", *(["docker"] if docker_available(timeout=5.0) else [])]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    result: dict[str, Any] = {"commit": commit, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                              "load_before": os.getloadavg(), "machine": platform.machine(),
                              "timeout_s": TIMEOUT_S, "repeat": repeat}
    samples: dict[str, list[float]] = {"baseline: host subprocess.run": []}
    sandboxes = {kind: open_kind(kind) for kind in kinds}
    try:
        for sandbox in sandboxes.values():
            sandbox.shell("true")
        # Interleaved rounds: the machine's drifting load falls on every case alike.
        for _ in range(repeat):
            samples["baseline: host subprocess.run"] += timed(host_baseline, 1)
            for kind, sandbox in sandboxes.items():
                for name, case in cases(sandbox).items():
                    samples.setdefault(f"{kind}: {name}", []).extend(timed(case, 1))
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    base = statistics.median(samples["baseline: host subprocess.run"])
    result["cases"] = {name: {**summary(values), "ratio_p50_to_baseline": statistics.median(values) / base}
                       for name, values in samples.items()}
    result["load_after"] = os.getloadavg()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="rounds (each case once per round)")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/timeouts.json"))
    args = parser.parse_args()
    write_result(bench(args.repeat), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
