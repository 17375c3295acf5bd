"""Generating 10,000 tasks per domain: wall time from a fresh process, against a one-minute budget.

Each registered domain with a generator runs in a process of its own (so one-time costs are
counted: reading the KG graph, opening the shop's index, loading the DB tables), generates
``--count`` tasks with seed 0, and checks they are distinct (content without the id). Reported
per domain: the total wall time, the time per task, the share of train and test tasks, and,
for the record, the time a train-only set of the same size takes (``--split train``).

The baseline, measured in the same run, is the naive way to make KG questions: running each
question's tool calls through an episode's ``KGSession`` (what ``make_suite`` does for the
bundled suite), timed on ``--baseline`` questions and extrapolated to ``--count``; the ratio
is baseline time / generator time.

Usage::

    python benchmarks/bench_generate.py [--count 10000] [--baseline 100] [--json PATH]

Exit status 1 when a domain takes longer than the budget (60 s) or yields fewer distinct tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 60.0

_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from agentunit_gym.core.registry import get_domain
domain = get_domain(sys.argv[1])
imported = time.perf_counter()
tasks = domain.generate_tasks(int(sys.argv[2]), seed=0, split=sys.argv[3] or None)
done = time.perf_counter()
distinct = len({t.model_copy(update={"id": "x"}).model_dump_json() for t in tasks})
splits = {}
for t in tasks:
    splits[t.split] = splits.get(t.split, 0) + 1
print(json.dumps({"total_s": done - started, "import_s": imported - started, "generate_s": done - imported,
                  "distinct": distinct, "splits": splits, "families": len({t.template for t in tasks})}))
"""


def run_child(domain: str, count: int, split: str) -> dict[str, Any]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, domain, str(count), split], capture_output=True, text=True,
                         check=True, cwd=REPO)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def kg_baseline(questions: int) -> float:
    """Seconds per question when each question's calls run through a ``KGSession`` (make_suite's way)."""
    from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
    from agentunit_gym.domains.kg.generate import candidates
    from agentunit_gym.domains.kg.make_suite import run_actions
    from agentunit_gym.domains.kg.store import bundled_store

    pool = candidates()[:: max(1, len(candidates()) // questions)][:questions]
    store = EmbeddedSPARQL(bundled_store())
    started = time.perf_counter()
    for c in pool:
        assert run_actions(store, dict(c.entities), c.actions) == list(c.answer), c.question
    return (time.perf_counter() - started) / len(pool)


def main() -> int:
    from agentunit_gym.core.registry import domains

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=100, help="KG questions the baseline times")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "generate.json")
    args = parser.parse_args()
    load = os.getloadavg()
    results: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                           "loadavg_at_start": load},
                               "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "count": args.count, "budget_s": BUDGET_S, "domains": {}}
    ok = True
    for domain in domains():
        if domain.generator is None:
            continue
        row = run_child(domain.name, args.count, "")
        row["per_task_ms"] = row["generate_s"] / args.count * 1000
        row["train_only"] = run_child(domain.name, args.count, "train")
        row["within_budget"] = row["total_s"] < BUDGET_S and row["distinct"] == args.count
        ok &= row["within_budget"]
        results["domains"][domain.name] = row
        print(f"{domain.name}: {args.count} tasks in {row['total_s']:.1f} s ({row['per_task_ms']:.2f} ms a task, "
              f"import {row['import_s']:.1f} s), {row['distinct']} distinct, splits {row['splits']}")
    per_question = kg_baseline(args.baseline)
    kg = results["domains"].get("kg")
    results["kg_baseline"] = {"questions": args.baseline, "per_question_ms": per_question * 1000,
                              "extrapolated_s": per_question * args.count,
                              "ratio": per_question * args.count / kg["total_s"] if kg else None}
    print(f"kg baseline (a KGSession per question): {per_question * 1000:.1f} ms a question, "
          f"{per_question * args.count:.0f} s for {args.count}")
    results["machine"]["loadavg_at_end"] = os.getloadavg()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}; {'every domain within' if ok else 'NOT within'} {BUDGET_S:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
