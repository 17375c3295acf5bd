"""Print docs/baselines.md's tables from the runs of `bash scripts/real-model.sh baselines OUT`.

Per protocol and domain: episodes, successes, the episodes' finish reasons (how the env ended
them) and the model's stop reasons over every turn (the server's ``finish_reason``), mean
steps and tokens per turn.

Usage: python scripts/real_model_table.py OUT
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from agentunit_gym.eval.record.records import iter_records


def mix(counter: Counter[str]) -> str:
    total = sum(counter.values())
    return ", ".join(f"{name} {count} ({100 * count / total:.0f}%)" for name, count in counter.most_common()) or "-"


def table(run_dir: Path) -> list[str]:
    rows: dict[str, dict[str, object]] = {}
    for record, trace in iter_records(run_dir):
        domain = trace.domain if trace is not None else record.env_id.split("/")[-1].split("-")[0].lower()
        row = rows.setdefault(domain, {"episodes": 0, "success": 0, "status": Counter(), "finish": Counter(),
                                       "stop": Counter(), "steps": 0, "tokens_in": 0, "tokens_out": 0, "turns": 0,
                                       "replies": Counter()})
        row["episodes"] += 1  # type: ignore[operator]
        row["success"] += int(record.success)  # type: ignore[operator]
        row["steps"] += record.steps  # type: ignore[operator]
        row["finish"][record.finish_reason or record.status] += 1  # type: ignore[index]
        for step in trace.steps if trace is not None else ():
            row["stop"][step.usage.finish_reason or "none"] += 1  # type: ignore[index]
            error = step.action_error or {}
            kind = ("truncated " if error.get("truncated_reply") else "") + str(error.get("issue", "")) if error \
                else "action"
            row["replies"][kind] += 1  # type: ignore[index]
            row["tokens_in"] += step.usage.tokens_in or 0  # type: ignore[operator]
            row["tokens_out"] += step.usage.tokens_out or 0  # type: ignore[operator]
            row["turns"] += 1  # type: ignore[operator]
    lines = ["| domain | episodes | success | episode finish reasons | model stop reasons (turns) "
             "| replies (turns: an action, or the invalid reply's issue) | mean steps | tokens in / out per turn |",
             "|---|---|---|---|---|---|---|---|"]
    for domain, row in sorted(rows.items()):
        turns = max(1, int(row["turns"]))  # type: ignore[call-overload]
        steps = int(row["steps"]) / max(1, int(row["episodes"]))  # type: ignore[call-overload]
        lines.append(f"| {domain} | {row['episodes']} | {row['success']} | {mix(row['finish'])} "  # type: ignore[arg-type]
                     f"| {mix(row['stop'])} | {mix(row['replies'])} | {steps:.1f} "  # type: ignore[arg-type]
                     f"| {int(row['tokens_in']) // turns} / {int(row['tokens_out']) // turns} |")  # type: ignore[call-overload]
    return lines


def main(out: Path) -> int:
    for run in sorted(p for p in out.iterdir() if (p / "episodes.jsonl").exists()):
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        print(f"\n### protocol {config.get('protocol', 'agentunit')} ({run})\n")
        print("\n".join(table(run)))
        criteria = run / "judge" / "criteria.json"
        if criteria.exists():
            data = json.loads(criteria.read_text(encoding="utf-8"))
            lines = [json.loads(x) for x in (run / "judge" / "judged.jsonl").read_text().splitlines() if x.strip()]
            kinds = Counter(x["error_kind"] or "judged" for x in lines)
            print(f"\njudge: answers as {data.get('reply_format')}; {mix(kinds)}; tokens in "
                  f"{data['usage'].get('tokens_in')}, out {data['usage'].get('tokens_out')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/real-model")))
