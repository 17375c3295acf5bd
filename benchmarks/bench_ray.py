"""``eval --ray`` against a local run, on one machine: what the cluster path costs.

A two-node Ray cluster is started on this machine (``ray start``, as the tests do), and the
same episodes run twice: locally (asynchronous episodes in this process) and with ``--ray``
over both nodes, at the same total concurrency. The agent replays the oracle's actions after
a fixed delay per turn (a stand-in for a model), so both runs wait on the same agent time;
``ideal`` is that agent time divided by the concurrency. The figures: each run's wall time
(``elapsed_s``, Ray's actor start included) and its efficiency (``ideal / elapsed``); the
ratio of the two efficiencies is the cost of the cluster path on one machine (on several
machines the cluster adds their cores and backends, which one machine cannot show).

Usage (from the repo root)::

    python benchmarks/bench_ray.py [--episodes 48] [--runs 4] [--concurrency 8] [--delay 0.25] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentunit_gym.eval.agents.builtin import OracleAgent  # noqa: E402
from agentunit_gym.eval.evaluate import evaluate  # noqa: E402
from agentunit_gym.eval.plan.config import EvalConfig  # noqa: E402
from agentunit_gym.eval.record.records import read_records  # noqa: E402
from tests.eval.raynodes import RAY_ENV, two_node_cluster  # noqa: E402

DELAY_S = 0.25


class DelayedOracle(OracleAgent):
    """The oracle, replying after a fixed delay."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        time.sleep(DELAY_S)
        return super().act(observation, info)


def run(config: EvalConfig, out: Path, remote: Any = None) -> dict[str, Any]:
    started = time.perf_counter()
    result = evaluate(config, out, agent_factory=DelayedOracle, remote=remote)
    wall = time.perf_counter() - started
    records = read_records(out / "episodes.jsonl")
    turns = sum(r.steps for r in records)
    ideal = turns * DELAY_S / config.concurrency
    return {"episodes": len(records), "success": sum(r.success for r in records), "turns": turns,
            "elapsed_s": round(result.outcome.elapsed_s, 2), "wall_s": round(wall, 2), "ideal_s": round(ideal, 2),
            "efficiency": round(ideal / result.outcome.elapsed_s, 3),
            "nodes": len({r.node for r in records})}


def main() -> None:
    global DELAY_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48, help="tasks (-n)")
    parser.add_argument("--runs", type=int, default=4, help="repeats per task")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=DELAY_S)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    DELAY_S = args.delay
    os.environ.update(RAY_ENV)
    from agentunit_gym.eval.run.cluster import connect_cluster

    config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="delayed-oracle", n=args.episodes,
                        runs=args.runs, concurrency=args.concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        local = run(config, Path(tmp) / "local")
        with two_node_cluster() as (address, _, _):
            remote = connect_cluster(address)
            try:
                on_ray = run(config, Path(tmp) / "ray", remote)
            finally:
                remote.close()
    result = {"benchmark": "ray", "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "delay_s": DELAY_S, "runs": args.runs, "concurrency": args.concurrency, "local": local,
              "ray_two_nodes": on_ray,
              "efficiency_ratio": round(on_ray["efficiency"] / local["efficiency"], 3)}
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
