"""The OS episode through the public gym API against the sandbox's own reset and AgentBench's way.

One episode = ``env.reset(options={"task_id": ...})`` on ``gym.make("AgentUnit/OS-v0",
backend=...)`` (the sandbox's reset in place, the task's init scripts, its start script,
the prompt) and 5 trivial steps (``true`` in the agent's shell); one env, sequential, every
task of the bundled suite the backend runs, ``--rounds`` passes. Measured in the same run:

* **the sandbox's own reset in place** (``env.unwrapped.sandbox.reset()``), alternated with
  the gym episodes on the same env: after each gym episode, a sandbox episode (the reset,
  timed, then 5 ``shell("true")``), so both see the same load. The gym reset's p50 over it is
  the issue's first ratio (target <= 1.5x), the gym reset's p90 over its own p50 the second
  (target <= 2x).
* **AgentBench's way** (docker, with the Docker SDK): a new container per episode, ``docker
  exec`` per init script, for the start script and for each of the 5 commands, then remove
  the container; half of its episodes before ours and half after (the load drifts). Episodes
  per second of ours over it is the third ratio (target >= 30x on docker; the local
  backend's figure is beside it).

The machine is shared: the JSON records the commit, the time and the load before and after;
compare ratios measured in the same run. The table it prints (markdown) is what
docs/performance.md shows.

Usage::

    python benchmarks/bench_os_gym.py [--rounds 2] [--baseline-episodes 20]
        [--backends docker local] [--json benchmarks/results/os_gym.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from bench_os_episodes import naive_start
from timing import summary, write_result

import agentunit_gym  # registers the env ids
from agentunit_gym.backends import process
from agentunit_gym.backends.images import ensure_image
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.os.task import OSTask

STEPS = 5
STEP = "Act: bash\n```bash\ntrue\n```"
TARGET_RESET_RATIO = 1.5
TARGET_TAIL_RATIO = 2.0
TARGET_NAIVE_RATIO = 30.0


def run_backend(backend: str, rounds: int) -> dict[str, Any]:
    """Gym episodes and sandbox episodes, alternated, on one env of ``backend``."""
    env = gym.make("AgentUnit/OS-v0", backend=backend)
    try:
        inner = env.unwrapped
        tasks = [t for t in inner.tasks if isinstance(t, OSTask)]  # type: ignore[attr-defined]
        sandbox = inner.sandbox  # type: ignore[attr-defined]
        env.reset(options={"task_id": tasks[0].id})  # warm-up: image, container or box; not timed
        for _ in range(STEPS):
            env.step(STEP)
        gym_resets, gym_steps, episodes, sandbox_resets, sandbox_steps = [], [], [], [], []
        by_task: dict[str, list[float]] = {}
        for _ in range(rounds):
            for task in tasks:
                began = time.perf_counter()
                env.reset(options={"task_id": task.id})
                reset_ms = (time.perf_counter() - began) * 1000.0
                for _ in range(STEPS):
                    t = time.perf_counter()
                    env.step(STEP)
                    gym_steps.append((time.perf_counter() - t) * 1000.0)
                episodes.append((time.perf_counter() - began) * 1000.0)
                gym_resets.append(reset_ms)
                by_task.setdefault(task.id, []).append(reset_ms)
                # The sandbox's own episode, on the state the gym episode left.
                t = time.perf_counter()
                sandbox.reset()
                sandbox_resets.append((time.perf_counter() - t) * 1000.0)
                for _ in range(STEPS):
                    t = time.perf_counter()
                    sandbox.shell("true")
                    sandbox_steps.append((time.perf_counter() - t) * 1000.0)
    finally:
        env.close()
    slowest = sorted(by_task.items(), key=lambda item: -max(item[1]))[:5]
    return {
        "tasks": len(tasks), "episodes": len(episodes),
        "episodes_per_s": len(episodes) / (sum(episodes) / 1000.0),
        "gym_reset": summary(gym_resets), "gym_step": summary(gym_steps), "episode": summary(episodes),
        "sandbox_reset": summary(sandbox_resets), "sandbox_step": summary(sandbox_steps),
        "slowest_resets_ms": {task_id: [round(x, 1) for x in times] for task_id, times in slowest},
    }


def naive_episode(client: Any, image: str, task: OSTask) -> float:
    """AgentBench's way: new container, ``docker exec`` per script and command, remove. Milliseconds."""
    began = time.perf_counter()
    container = naive_start(client, image, task)
    try:
        for _ in range(STEPS):
            container.exec_run(["bash", "-c", "true"])
    finally:
        container.remove(force=True)
    return (time.perf_counter() - began) * 1000.0


def run_naive(tasks: list[OSTask], start: int, episodes: int) -> list[float]:
    client = process.docker_client(timeout=120.0)
    try:
        image = ensure_image("os", client=client)
        naive_episode(client, image, tasks[start % len(tasks)])  # warm-up, not timed
        return [naive_episode(client, image, tasks[(start + i) % len(tasks)]) for i in range(episodes)]
    finally:
        client.close()


def _ms(row: dict[str, float]) -> str:
    return f"{row['p50_ms']:.1f} / {row['p90_ms']:.1f} ms"


def table(rows: dict[str, dict[str, Any]], naive: dict[str, Any]) -> str:
    lines = [
        "| backend | episodes | sandbox reset in place p50 / p90 | gym reset p50 / p90 | gym / sandbox p50 "
        "| gym reset p90 / p50 | step p50 | episodes/s | vs AgentBench's way |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, row in rows.items():
        lines.append(
            f"| {backend} | {row['episodes']} | {_ms(row['sandbox_reset'])} | {_ms(row['gym_reset'])} "
            f"| {row['reset_ratio']:.2f}x | {row['tail_ratio']:.2f}x | {row['gym_step']['p50_ms']:.2f} ms "
            f"| {row['episodes_per_s']:.1f} | {row['naive_ratio']:.1f}x |")
    lines.append(f"| AgentBench's way (docker: container + `docker exec` per command) | {naive['episodes']} | - "
                 f"| - | - | - | - | {naive['episodes_per_s']:.2f} | 1x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the suite per backend (default 2)")
    parser.add_argument("--baseline-episodes", type=int, default=20,
                        help="AgentBench-way episodes, half before ours and half after (default 20)")
    parser.add_argument("--backends", nargs="+", default=["docker", "local"], choices=["docker", "local"])
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/os_gym.json"))
    args = parser.parse_args(argv)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_before = os.getloadavg()
    suite = [t for t in get_domain("os").bundled_tasks() if isinstance(t, OSTask) and t.supports("docker")]
    first = args.baseline_episodes // 2
    naive_ms = run_naive(suite, 0, first)
    rows = {backend: run_backend(backend, args.rounds) for backend in args.backends}
    naive_ms += run_naive(suite, first, args.baseline_episodes - first)
    naive = {"episodes": len(naive_ms), "episodes_per_s": len(naive_ms) / (sum(naive_ms) / 1000.0),
             "episode": summary(naive_ms)}
    for row in rows.values():
        row["reset_ratio"] = row["gym_reset"]["p50_ms"] / row["sandbox_reset"]["p50_ms"]
        row["tail_ratio"] = row["gym_reset"]["p90_ms"] / row["gym_reset"]["p50_ms"]
        row["naive_ratio"] = row["episodes_per_s"] / naive["episodes_per_s"]
    markdown = table(rows, naive)
    write_result({
        "benchmark": "os_gym", "commit": commit, "package": str(Path(agentunit_gym.__file__).parent),
        "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_before": load_before, "load_after": os.getloadavg(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rounds": args.rounds, "steps_per_episode": STEPS,
        "targets": {"gym_over_sandbox_reset_p50": TARGET_RESET_RATIO, "gym_reset_p90_over_p50": TARGET_TAIL_RATIO,
                    "episodes_per_s_over_naive_docker": TARGET_NAIVE_RATIO},
        "results": rows, "naive": naive, "table": markdown,
    }, args.json)
    print()
    print(f"commit {commit}, {started}, load {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
