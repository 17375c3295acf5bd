"""``agentunit-gym compare RUN_A RUN_B``: metrics side by side, with significance."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare", help="compare two eval runs metric by metric",
        description="Metrics of two runs side by side. A difference is significant when the 95% bootstrap "
                    "interval of B - A excludes 0: paired by task when the runs share tasks (the same tasks "
                    "resampled for both; the success rate also gets an exact sign test over tasks), "
                    "unpaired only for disjoint task sets.")
    p.add_argument("run_a", type=Path, help="baseline run directory")
    p.add_argument("run_b", type=Path, help="candidate run directory")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--all", action="store_true", help="also list metrics neither run has")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def task_set_note(run_a: Path, run_b: Path) -> str:
    """A sentence when the two runs did not run the same tasks (empty when they did)."""
    from agentunit_gym.eval.report.compare import pairing
    from agentunit_gym.eval.report.summary import load_episodes

    how = pairing(load_episodes(run_a)[1], load_episodes(run_b)[1])
    if how.only_a == 0 and how.only_b == 0:
        return ""
    if how.kind == "unpaired":
        return (f"the runs share no task (A ran {how.only_a}, B ran {how.only_b}); the comparison is unpaired, "
                "between different task sets.")
    return (f"the runs ran different task sets: {how.only_a} task(s) only in A, {how.only_b} only in B; "
            f"compared on the {how.tasks} shared task(s) only.")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from agentunit_gym.cli.console import table_console
    from agentunit_gym.eval.report.compare import compare_runs
    from agentunit_gym.eval.report.html import fmt

    rows = compare_runs(args.run_a, args.run_b, seed=args.seed)
    note = task_set_note(args.run_a, args.run_b)
    if note:
        print(f"agentunit-gym compare: {note}", file=sys.stderr)
    if not args.all:
        rows = [r for r in rows if r.a is not None or r.b is not None]
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    method = next((r.method for r in rows if r.method), "")
    table = Table(title=f"A = {args.run_a}   B = {args.run_b}   ({method.replace('_', ' ')})")
    for col in ("metric", "A", "B", "B - A", "95% CI of B - A", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    styles = {"better": "green", "worse": "red", "different": "yellow", "same": "dim", "n/a": "dim"}
    for r in rows:
        unit = r.unit if r.unit != "share" else "share"
        diff = "n/a" if r.diff is None else (f"{100 * r.diff:+.1f} pp" if unit == "share" else f"{r.diff:+.3g}")
        ci = "" if r.diff_low is None else (
            f"[{100 * r.diff_low:+.1f}, {100 * r.diff_high:+.1f}] pp" if unit == "share"  # type: ignore[operator]
            else f"[{r.diff_low:+.3g}, {r.diff_high:+.3g}]")
        table.add_row(r.name, fmt(r.a, r.unit), fmt(r.b, r.unit), diff, ci,
                      f"[{styles[r.verdict]}]{r.verdict}[/]")
    table_console().print(table)
    success = next((r for r in rows if r.name == "success_rate" and r.p_value is not None), None)
    if success is not None:
        Console().print(f"success rate, exact sign test over tasks: p = {success.p_value:.3g}")
    return 0
