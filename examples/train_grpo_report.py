"""Summarise a run of examples/train_grpo.py: before/after metrics with 95% intervals, and the plot.

Reads the raw results (every evaluation episode and the per-step training records) and writes
the summary that benchmarks/results/train_grpo.json holds, with the intervals of the
project's statistics (``agentunit_gym.eval.report.stats``): a task's repeats are resampled together
(cluster bootstrap), and each difference is paired by task (the same tasks and seeds on both
sides). The plot needs matplotlib (the training venv has it).

Run it::

    python examples/train_grpo_report.py runs/train-grpo/raw.json --output benchmarks/results/train_grpo.json \
        --plot docs/img/train_grpo.png
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentunit_gym.eval.report.stats import (
    bootstrap,
    cluster_sums,
    difference_draws,
    percentile_interval,
    rate_interval,
)

INVALID = ("invalid_format", "invalid_action")
EVAL_FIELDS = ("eval_max_turns", "max_new_tokens", "reply_opening", "eval_temperature", "format_penalty",
               "eval_repeats_bundled", "eval_generated", "eval_batch", "seed")
"""The settings an evaluation depends on (examples/train_grpo.py's ``EVAL_FIELDS``)."""
METRICS: dict[str, Callable[[dict[str, Any]], float]] = {
    "success_rate": lambda e: float(e["success"]),
    "valid_action_rate": lambda e: float(e["finish_reason"] not in INVALID),
    "mean_reward": lambda e: float(e["reward"]),
}
"""Per episode: solved; ended without an invalid reply (1 - IF - IA); the return the policy was trained on."""


def side(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each metric's value and 95% interval over one side's episodes (clusters: the tasks)."""
    tasks = [e["task_id"] for e in episodes]
    out: dict[str, Any] = {"episodes": len(episodes), "tasks": len(set(tasks)),
                           "finish_reasons": dict(Counter(e["finish_reason"] for e in episodes)),
                           "mean_turns": float(np.mean([e["turns"] for e in episodes]))}
    for name, value in METRICS.items():
        values = [value(e) for e in episodes]
        interval = rate_interval(values, tasks) if name != "mean_reward" else bootstrap(values, clusters=tasks)
        out[name] = {"value": float(np.mean(values)), "low": interval.low, "high": interval.high,
                     "method": interval.method}
    return out


def difference(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """After minus before for each metric, with a 95% interval from a bootstrap paired by task."""
    order = sorted({e["task_id"] for e in before})
    if order != sorted({e["task_id"] for e in after}):
        raise ValueError("the two sides were played on different tasks; a paired difference needs the same ones")
    out: dict[str, Any] = {}
    for name, value in METRICS.items():
        sides = []
        for episodes in (before, after):
            ranked = sorted(episodes, key=lambda e: order.index(e["task_id"]))
            num, den, _ = cluster_sums(np.array([value(e) for e in ranked]), [e["task_id"] for e in ranked])
            sides.append((num, den))
        draws = difference_draws(sides[0], sides[1], paired=True, rng=np.random.default_rng(seed))
        interval = percentile_interval(draws, "paired_cluster_bootstrap")
        point = sides[1][0].sum() / sides[1][1].sum() - sides[0][0].sum() / sides[0][1].sum()
        out[name] = {"value": float(point), "low": interval.low, "high": interval.high, "method": interval.method,
                     "excludes_0": bool(interval.low > 0 or interval.high < 0)}
    return out


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One raw result from the outputs of phases run as separate processes (the first one's config)."""
    out: dict[str, Any] = {**parts[0], "before": {}, "after": {}}
    for part in parts:
        differ = [k for k in EVAL_FIELDS if part["config"][k] != out["config"][k]]
        if differ:
            raise ValueError(f"the parts were evaluated with different settings: {', '.join(differ)}")
        for key in ("before", "after"):  # shards of one evaluation add up
            for name, episodes in part.get(key, {}).items():
                out[key][name] = out[key].get(name, []) + episodes
        out.update({k: v for k, v in part.items() if k.endswith("_s") and k not in ("load_s", "total_s")})
        if part.get("history"):
            out["history"] = part["history"]
    return out


def summarise(raw: dict[str, Any], commit: str = "") -> dict[str, Any]:
    """The results file: config, commit, steps, times, the training curve, before/after metrics."""
    history = raw.get("history", [])
    result: dict[str, Any] = {
        "config": raw["config"], "train_families": raw["train_families"], "commit": commit,
        "steps": len(history), "train_episodes": len(history) * raw["config"]["groups_per_step"]
        * raw["config"]["group_size"],
        "wall_time_s": {k: v for k, v in raw.items() if k.endswith("_s")},
        "history": [{k: r[k] for k in ("step", "reward", "valid_action_rate", "success_rate", "elapsed_s")}
                    for r in history],
        "sets": {},
    }
    for name in raw["before"]:
        before, after = raw["before"][name], raw["after"].get(name)
        entry: dict[str, Any] = {"before": side(before)}
        if after:
            entry["after"] = side(after)
            entry["difference"] = difference(before, after)
        result["sets"][name] = entry
    return result


def table(result: dict[str, Any]) -> str:
    """The before/after table (Markdown) of docs/baselines.md: each metric with its 95% interval."""
    names = {"success_rate": "success rate", "valid_action_rate": "valid-action rate (1 - IF - IA)",
             "mean_reward": "mean reward (shaped)"}

    def cell(m: dict[str, Any], signed: bool = False) -> str:
        sign = "+" if signed else ""
        return f"{m['value']:{sign}.3f} [{m['low']:{sign}.3f}, {m['high']:{sign}.3f}]"

    lines = ["| set | metric | before | after | after - before |", "|---|---|---|---|---|"]
    for name, entry in result["sets"].items():
        label = f"{name} ({entry['before']['episodes']} episodes a side, {entry['before']['tasks']} tasks)"
        for metric, title in names.items():
            after = entry.get("after")
            lines.append(f"| {label} | {title} | {cell(entry['before'][metric])} | "
                         f"{cell(after[metric]) if after else '-'} | "
                         f"{cell(entry['difference'][metric], True) if after else '-'} |")
            label = ""
    return "\n".join(lines)


def plot(history: Sequence[dict[str, Any]], path: Path, window: int = 5) -> None:
    """Mean reward and valid-action rate per training step (points) with a moving average (lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([r["step"] for r in history])
    fig, axes = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    for ax, key, label in ((axes[0], "reward", "mean reward (shaped)"),
                           (axes[1], "valid_action_rate", "valid-action rate")):
        values = np.array([r[key] for r in history], dtype=float)
        ax.plot(steps, values, "o", ms=3, alpha=0.45, label="per step")
        if len(values) >= window:
            smooth = np.convolve(values, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, "-", lw=2, label=f"moving average ({window} steps)")
        ax.set_ylabel(label)
        if key == "valid_action_rate":
            ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    axes[1].set_xlabel("training step")
    axes[0].set_title("GRPO on DB-v0 train tasks: SmolLM2-135M-Instruct + LoRA, 2 shared CPU cores", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, nargs="+",
                        help="examples/train_grpo.py's --output; several (phases run apart) are merged")
    parser.add_argument("--output", type=Path, required=True, help="the summary (JSON)")
    parser.add_argument("--plot", type=Path, default=None, help="the training curve (PNG)")
    parser.add_argument("--commit", default="", help="the commit the run was made at")
    args = parser.parse_args(argv)
    raw = merge([json.loads(path.read_text(encoding="utf-8")) for path in args.raw])
    result = summarise(raw, args.commit)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.plot and raw.get("history"):
        plot(raw["history"], args.plot)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
