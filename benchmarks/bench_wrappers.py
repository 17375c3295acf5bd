"""Per-step overhead of the standard wrapper stack (``make_eval_env``) over the bare env.

Each episode: reset, then the task's reference solution (the oracle's replies) until the
episode ends. Measured on the toy env (no backend: the stack's own cost stands out) and on
the DB env on SQLite (a real, cheap backend), bare and stacked, in the same run; the
verdict is the added time per step and the ratio stacked / bare. Best of ``--rounds``
rounds of ``--episodes`` episodes each (the minimum is the least disturbed by other jobs on
a shared machine).

Usage::

    python benchmarks/bench_wrappers.py [--episodes 200] [--rounds 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the toy env lives in the tests

import agentunit_gym  # noqa: E402,F401 - registers the ids
from agentunit_gym.wrappers.stack import make_eval_env  # noqa: E402
from tests.wrappers.fakes import TOY_ID, register_toys  # noqa: E402


def episodes_per_step(make: Callable[[], gym.Env[str, str]], episodes: int, rounds: int) -> dict[str, float]:
    """Best (over rounds) mean wall-clock milliseconds per step, with the step count."""
    env = make()
    base: Any = env.unwrapped
    tasks = [t for t in base.tasks if t.reference_solution]
    best, steps_per_round = float("inf"), 0
    try:
        for _ in range(rounds):
            steps = 0
            started = time.perf_counter()
            for i in range(episodes):
                task = tasks[i % len(tasks)]
                env.reset(options={"task_id": task.id})
                for step in task.reference_solution:
                    _, _, terminated, truncated, _ = env.step(base.render_action(step))
                    steps += 1
                    if terminated or truncated:
                        break
            elapsed = time.perf_counter() - started
            best, steps_per_round = min(best, 1000.0 * elapsed / steps), steps
    finally:
        env.close()
    return {"ms_per_step": best, "steps_per_round": steps_per_round}


def run(episodes: int, rounds: int) -> dict[str, Any]:
    register_toys()
    cases: dict[str, tuple[Callable[[], gym.Env[str, str]], Callable[[], gym.Env[str, str]]]] = {
        "toy": (lambda: gym.make(TOY_ID), lambda: make_eval_env(TOY_ID, max_context_tokens=100_000)),
        "db_sqlite": (lambda: gym.make("AgentUnit/DB-v0", backend="sqlite"),
                      lambda: make_eval_env("AgentUnit/DB-v0", backend="sqlite", max_context_tokens=100_000,
                                            trap_rate=0.0)),
    }
    results: dict[str, Any] = {}
    for name, (bare, stacked) in cases.items():
        b = episodes_per_step(bare, episodes, rounds)
        s = episodes_per_step(stacked, episodes, rounds)
        results[name] = {"bare": b, "stacked": s, "added_ms_per_step": s["ms_per_step"] - b["ms_per_step"],
                         "ratio_stacked_over_bare": s["ms_per_step"] / b["ms_per_step"]}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="episodes per round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept (default 3)")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/wrappers.json"))
    args = parser.parse_args()
    results = run(args.episodes, args.rounds)
    print(f"{'env':<12}{'bare ms/step':>14}{'stacked ms/step':>17}{'added ms':>10}{'ratio':>8}")
    for name, r in results.items():
        print(f"{name:<12}{r['bare']['ms_per_step']:>14.3f}{r['stacked']['ms_per_step']:>17.3f}"
              f"{r['added_ms_per_step']:>10.3f}{r['ratio_stacked_over_bare']:>8.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "benchmark": "wrappers", "episodes": args.episodes, "rounds": args.rounds, "machine": platform.machine(),
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **results,
    }, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
