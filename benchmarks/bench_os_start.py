"""The start script's cost, before and after issue 37, alternated in one run on one sandbox.

The bundled OS tasks whose start script launches background programs (``&``): after the
sandbox's reset and the task's init scripts, the start script is timed three ways, in
alternating order:

* ``before``: as before issue 37: ``shell()`` (what the command leaves is watched for a fork
  bomb until nothing new appeared for 150 ms) and the scripts' readiness polls every 50 ms;
* ``after``: ``shell_setup()`` (not watched: the task's own script) and polls every 5 ms (the
  suite's scripts as they are now);
* ``after, watched``: the new scripts through ``shell()``: what the watch alone costs.

A same-run comparison, so the machine's load falls on all three alike.

Usage::

    python benchmarks/bench_os_start.py [--rounds 6] [--backends docker local] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from timing import summary, write_result

from agentunit_gym.backends.sandbox.factory import open_sandbox
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.os.task import OSTask

VARIANTS = ("before", "after", "after, watched")


def measure(backend: str, tasks: list[OSTask], rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    sandbox = open_sandbox(backend)  # type: ignore[arg-type]
    try:
        sandbox.start()
        for index in range(rounds):
            order = VARIANTS if index % 2 == 0 else VARIANTS[::-1]
            for task in tasks:
                assert task.start is not None
                new = task.start.source(task.scripts_base)
                old = new.replace("seq 1 1000", "seq 1 100").replace("sleep 0.005", "sleep 0.05")
                for name in order:
                    sandbox.reset()
                    for script in task.init:
                        sandbox.run(script.source(task.scripts_base), language=script.language)
                    began = time.perf_counter()
                    if name == "before":
                        sandbox.shell(old, timeout=60)
                    elif name == "after":
                        sandbox.shell_setup(new, timeout=60)
                    else:
                        sandbox.shell(new, timeout=60)
                    samples[name].append((time.perf_counter() - began) * 1000.0)
    finally:
        sandbox.close()
    return {name: summary(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backends", nargs="+", default=["docker", "local"], choices=["docker", "local"])
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/os_start.json"))
    args = parser.parse_args(argv)
    tasks = [t for t in get_domain("os").bundled_tasks()
             if isinstance(t, OSTask) and t.start is not None and "&" in t.start.source(t.scripts_base)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = os.getloadavg()
    rows = {backend: measure(backend, [t for t in tasks if t.supports(backend)], args.rounds)
            for backend in args.backends}
    lines = ["| backend | start script | n | p50 | p90 |", "|---|---|---|---|---|"]
    for backend, row in rows.items():
        for name, stats in row.items():
            lines.append(f"| {backend} | {name} | {stats['n']} | {stats['p50_ms']:.1f} ms | {stats['p90_ms']:.1f} ms |")
    markdown = "\n".join(lines)
    write_result({"benchmark": "os_start", "commit": commit, "started": started,
                  "load_before": load_before, "load_after": os.getloadavg(),
                  "tasks": [t.id for t in tasks], "rounds": args.rounds, "results": rows, "table": markdown},
                 args.json)
    print()
    print(f"commit {commit}, {started}, load {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
