"""Episodes per second of the oracle over the bundled OS suite on Docker, against a naive baseline.

Ours: ``OSEnv(backend="docker")`` (one persistent shell, in-place reset, warm pool), the
oracle replaying each task's reference solution, at 1 and 2 workers (threads, each with its
own env). Baseline, measured in the same run: what a straightforward harness does, with the
Docker SDK directly: a new container per episode, ``docker exec`` per init script, per
command and per check script, then remove the container.

The result is a ratio (ours / baseline), since absolute times on a shared machine are noisy.
Target: >= 15x.

Usage::

    python benchmarks/bench_os_episodes.py [--rounds 2] [--baseline-episodes 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentunit_gym.backends import process
from agentunit_gym.backends.images import ensure_image
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.task import OSTask

TARGET_RATIO = 15.0


def run_ours(tasks: list[OSTask], workers: int, rounds: int) -> dict[str, Any]:
    """The oracle over ``tasks`` x ``rounds`` split across ``workers`` threads, each with its own env."""
    envs = [OSEnv(backend="docker") for _ in range(workers)]
    try:
        for env in envs:  # warm-up: image, first container, pool; not timed
            env.reset(options={"task_id": tasks[0].id})
        queue = [t for _ in range(rounds) for t in tasks]
        shares = [queue[i::workers] for i in range(workers)]
        rewards: list[float] = []
        durations: list[float] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def work(env: OSEnv, share: list[OSTask]) -> None:
            try:
                for task in share:
                    began = time.perf_counter()
                    env.reset(options={"task_id": task.id})
                    reward = 0.0
                    for step in task.reference_solution:
                        _, reward, terminated, truncated, _ = env.step(env.render_action(step))
                        if terminated or truncated:
                            break
                    with lock:
                        rewards.append(reward)
                        durations.append(time.perf_counter() - began)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(env, share)) for env, share in zip(envs, shares, strict=True)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=1800)
        elapsed = time.perf_counter() - started
        if errors:
            raise errors[0]
        if any(t.is_alive() for t in threads):
            raise TimeoutError("a benchmark worker did not finish within 30 minutes")
    finally:
        for env in envs:
            env.close()
    return {"episodes": len(rewards), "seconds": elapsed, "episodes_per_s": len(rewards) / elapsed,
            "success_rate": statistics.fmean(rewards) if rewards else 0.0,
            "p50_episode_ms": 1000 * statistics.median(durations), "durations": durations}


def _exec(container: Any, code: str, language: str, args: tuple[str, ...] = ()) -> tuple[int, str]:
    argv = ["bash", "-c", code, "bash", *args] if language == "bash" else ["python3", "-c", code, *args]
    exit_code, output = container.exec_run(argv, demux=False)
    return int(exit_code), (output or b"").decode("utf-8", "replace")


def naive_start(client: Any, image: str, task: OSTask) -> Any:
    """AgentBench's start of an episode: a new container, then ``docker exec`` per init script and
    for the start script. The caller removes the container (also when this raises, it is removed)."""
    container = client.containers.run(image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
                                      labels={"agentunit_gym": "1"}, working_dir="/root")
    try:
        base = task.scripts_base
        for script in task.init:
            _exec(container, script.source(base), script.language)
        if task.start is not None:
            _exec(container, task.start.source(base), task.start.language)
    except BaseException:
        container.remove(force=True)
        raise
    return container


def naive_episode(client: Any, image: str, task: OSTask) -> float:
    """One episode the naive way: new container, exec per script and command, remove."""
    container = naive_start(client, image, task)
    base = task.scripts_base
    try:
        answer = ""
        committed = None
        for step in task.reference_solution:
            arguments = step.arguments
            if step.tool == "bash":
                script = arguments if isinstance(arguments, str) else arguments["script"]
                _exec(container, script, "bash")
            else:
                committed = step.tool
                if step.tool == "answer":
                    answer = arguments if isinstance(arguments, str) else arguments["answer"]
        evaluation = task.evaluation
        if evaluation.match is not None:
            return float(committed == "answer" and evaluation.match.accepts(answer))
        params = [answer]
        for entry in evaluation.check or ():
            script = entry if entry is not None else evaluation.example
            assert script is not None
            code, output = _exec(container, script.source(base), script.language, tuple(params))
            if code != 0:
                return 0.0
            params.append(output)
        return 1.0
    finally:
        container.remove(force=True)


def run_baseline(tasks: list[OSTask], start: int, episodes: int) -> dict[str, Any]:
    """The naive harness over ``episodes`` episodes of the suite (cycled from ``start``), one worker."""
    client = process.docker_client(timeout=120.0)
    try:
        image = ensure_image("os", client=client)
        picked = [tasks[(start + i) % len(tasks)] for i in range(episodes)]
        naive_episode(client, image, picked[0])  # warm-up, not timed
        rewards, durations = [], []
        started = time.perf_counter()
        for task in picked:
            began = time.perf_counter()
            rewards.append(naive_episode(client, image, task))
            durations.append(time.perf_counter() - began)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    # Its success rate can be below 1: without a persistent shell, cwd, variables and jobs are lost.
    return {"episodes": len(rewards), "seconds": elapsed, "episodes_per_s": len(rewards) / elapsed,
            "success_rate": statistics.fmean(rewards), "durations": durations}


def _combine(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    episodes, seconds = a["episodes"] + b["episodes"], a["seconds"] + b["seconds"]
    success = (a["success_rate"] * a["episodes"] + b["success_rate"] * b["episodes"]) / episodes
    durations = a["durations"] + b["durations"]
    return {"episodes": episodes, "seconds": seconds, "episodes_per_s": episodes / seconds, "success_rate": success,
            "p50_episode_ms": 1000 * statistics.median(durations), "durations": durations}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the suite for ours (default 2)")
    parser.add_argument("--baseline-episodes", type=int, default=20,
                        help="episodes for the baseline, half before and half after ours (default 20)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/os_episodes.json"))
    args = parser.parse_args(argv)

    tasks = [t for t in get_domain("os").bundled_tasks() if isinstance(t, OSTask)]
    # The machine is shared and its load drifts: half the baseline runs before ours and half
    # after, so both sides see the same conditions on average.
    first = args.baseline_episodes // 2
    before = run_baseline(tasks, 0, first)
    ours = {workers: run_ours(tasks, workers, args.rounds) for workers in args.workers}
    after = run_baseline(tasks, first, args.baseline_episodes - first)
    baseline = _combine(before, after)
    rows: dict[str, dict[str, Any]] = {"baseline (container + exec per command)": baseline}
    for workers, row in ours.items():
        rows[f"agentunit-gym, {workers} worker(s)"] = row
    for row in rows.values():
        row["ratio_vs_baseline"] = row["episodes_per_s"] / baseline["episodes_per_s"]
        # Per-episode medians shrug off the stalls a shared machine causes; a second view.
        row["p50_ratio_vs_baseline"] = baseline["p50_episode_ms"] / row["p50_episode_ms"]
        del row["durations"]

    print(f"{'run':<42} {'episodes':>8} {'seconds':>8} {'ep/s':>8} {'success':>8} {'ratio':>7} "
          f"{'p50 ms':>8} {'p50 ratio':>9}")
    for name, row in rows.items():
        print(f"{name:<42} {row['episodes']:>8} {row['seconds']:>8.2f} {row['episodes_per_s']:>8.2f} "
              f"{row['success_rate']:>8.2f} {row['ratio_vs_baseline']:>6.1f}x {row['p50_episode_ms']:>8.1f} "
              f"{row['p50_ratio_vs_baseline']:>8.1f}x")
    best = max(row["ratio_vs_baseline"] for name, row in rows.items() if not name.startswith("baseline"))
    verdict = "meets" if best >= TARGET_RATIO else "misses"
    print(f"best ratio {best:.1f}x {verdict} the target of {TARGET_RATIO:g}x")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "benchmark": "os_episodes", "suite_tasks": len(tasks), "rounds": args.rounds,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "target_ratio": TARGET_RATIO, "results": rows,
    }, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
