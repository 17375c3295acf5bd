"""Judged metrics of a run: goal fidelity, one metric per verified criterion, and how far the
judge agrees with the env's own check.

- ``goal_fidelity``: the mean over judged episodes of the judge's 0-1 score (AgentUnit's
  F_goal), with a bootstrap interval.
- ``criterion:<domain>/<category>/<name>``: the mean over that set's judged episodes of the
  criterion's 0-1 score (the accepted value's position, worst 0, best 1), bootstrap interval.
- ``judge_agreement``: the share of judged episodes whose judged ``achieved`` equals the env's
  ``score.success``, with a Wilson interval; ``judged_coverage``: the share of episodes the
  judge answered for (unjudged ones are never scored).

Intervals come from :mod:`agentunit_gym.eval.report.stats` as the catalog's do: when a task was
repeated, its episodes are resampled together (a cluster bootstrap; ``rate_interval`` then
replaces the Wilson interval). ``compare`` pairs two runs by task when they share tasks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from agentunit_gym.eval.judge.run import JudgedEpisode, read_criteria, read_judged
from agentunit_gym.eval.report.comparison import Comparison
from agentunit_gym.eval.report.metrics import MetricValue
from agentunit_gym.eval.report.stats import bootstrap, difference_draws, percentile_interval, rate_interval

GROUP = "judge"


Values = list[tuple[str, float]]
"""(task, value) per episode: the task (``env|task_id``) is the cluster of its repeats."""


def task_of(key: str) -> str:
    """The task of an episode key ``env|task_id|run``."""
    return key.rsplit("|", 1)[0]


def _mean_metric(name: str, values: Values, seed: int) -> MetricValue:
    if not values:
        return MetricValue(name, GROUP, None, None, 0, "share", True)
    numbers = [v for _, v in values]
    interval = bootstrap(numbers, clusters=[t for t, _ in values], seed=seed)
    return MetricValue(name, GROUP, float(np.mean(numbers)), interval, len(values), "share", True)


def _rate_metric(name: str, hits: Values, seed: int) -> MetricValue:
    if not hits:
        return MetricValue(name, GROUP, None, None, 0, "share", True)
    outcomes = [bool(v) for _, v in hits]
    interval = rate_interval(outcomes, [t for t, _ in hits], seed=seed)
    return MetricValue(name, GROUP, sum(outcomes) / len(outcomes), interval, len(outcomes), "share", True)


def judged_values(lines: list[JudgedEpisode]) -> dict[str, Values]:
    """Per judged metric, the per-episode values with their task (what intervals and ``compare`` resample)."""
    out: dict[str, Values] = {"goal_fidelity": []}
    for line in lines:
        if line.status != "judged" or line.goal_fidelity is None:
            continue
        task = task_of(line.key)
        out["goal_fidelity"].append((task, line.goal_fidelity))
        for name, score in line.scores.items():
            out.setdefault(f"criterion:{line.criteria_set}/{name}", []).append((task, score))
    return out


def current_lines(run_dir: Path, keys: set[str] | None = None) -> list[JudgedEpisode]:
    """The judged lines of the run's episodes (``keys``: only those)."""
    return [v for k, v in sorted(read_judged(run_dir).items()) if keys is None or k in keys]


def judged_block(run_dir: Path, keys: set[str] | None = None, *, seed: int = 0) -> dict[str, Any] | None:
    """The ``judge`` block of ``summary.json``; None when the run was never judged.

    Args:
        run_dir: the run directory.
        keys: the episode keys the summary counts (judged lines of other episodes are ignored).
        seed: seeds the bootstrap.
    """
    stored = read_criteria(run_dir)
    if stored is None:
        return None
    lines = current_lines(run_dir, keys)
    judged = [x for x in lines if x.status == "judged"]
    metrics = {name: _mean_metric(name, values, seed) for name, values in judged_values(lines).items()}
    agree = sum(1 for x in judged if x.achieved == x.success)
    metrics["judge_agreement"] = _rate_metric(
        "judge_agreement", [(task_of(x.key), float(x.achieved == x.success)) for x in judged], seed)
    total = len(keys) if keys is not None else len(lines)
    covered = {x.key for x in judged}
    metrics["judged_coverage"] = _rate_metric(
        "judged_coverage", [(task_of(k), float(k in covered)) for k in sorted(keys or {x.key for x in lines})], seed)
    agreement = metrics["judge_agreement"].to_dict()
    agreement.update({
        "agree": agree,
        "judged_achieved_env_failed": sum(1 for x in judged if x.achieved and not x.success),
        "judged_failed_env_succeeded": sum(1 for x in judged if not x.achieved and x.success),
    })
    per_domain: dict[str, Any] = {}
    for domain in sorted({x.domain for x in lines}):
        subset = [x for x in lines if x.domain == domain]
        d_hits = [(task_of(x.key), float(x.achieved == x.success)) for x in subset if x.status == "judged"]
        per_domain[domain] = {
            "goal_fidelity": _mean_metric("goal_fidelity", judged_values(subset)["goal_fidelity"], seed).to_dict(),
            "judge_agreement": _rate_metric("judge_agreement", d_hits, seed).to_dict(),
        }
    return {
        "judge": stored.get("judge"),
        "base_url": stored.get("base_url"),
        "criteria_choice": stored.get("criteria_choice"),
        "verifier": stored.get("verifier"),
        "usage": stored.get("usage"),
        "episodes": total,
        "judged": len(judged),
        "unjudged": len(lines) - len(judged),
        "unjudged_reasons": dict(Counter(x.error_kind for x in lines if x.status == "unjudged")),
        "not_yet_judged": total - len(lines),
        "metrics": {name: m.to_dict() for name, m in metrics.items()},
        "agreement": agreement,
        "per_domain": per_domain,
        "criteria": stored.get("sets", []),
    }


def _task_sums(values: Values, tasks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    index = {t: i for i, t in enumerate(tasks)}
    num, den = np.zeros(len(tasks)), np.zeros(len(tasks))
    for task, value in values:
        if task in index:
            num[index[task]] += value
            den[index[task]] += 1.0
    return num, den


def judged_comparisons(run_a: Path, run_b: Path, *, seed: int = 0, resamples: int = 2000) -> list[Comparison]:
    """``compare``'s rows for the judged metrics: a bootstrap of the difference of means, paired by
    task over the tasks both runs judged (as ``compare`` pairs the catalog), unpaired when they
    share none. Empty when neither run was judged."""
    lines_a, lines_b = current_lines(run_a), current_lines(run_b)
    if not lines_a and not lines_b:
        return []
    va, vb = judged_values(lines_a), judged_values(lines_b)
    out: list[Comparison] = []
    for name in sorted(set(va) | set(vb)):
        a, b = va.get(name) or [], vb.get(name) or []
        shared = sorted({t for t, _ in a} & {t for t, _ in b})
        if shared:
            a = [(t, v) for t, v in a if t in set(shared)]
            b = [(t, v) for t, v in b if t in set(shared)]
        mean_a = float(np.mean([v for _, v in a])) if a else None
        mean_b = float(np.mean([v for _, v in b])) if b else None
        low = high = None
        method = ""
        if a and b:
            paired = bool(shared)
            tasks_a = shared or sorted({t for t, _ in a})
            tasks_b = shared or sorted({t for t, _ in b})
            draws = difference_draws(_task_sums(a, tasks_a), _task_sums(b, tasks_b), paired=paired,
                                     rng=np.random.default_rng(seed), resamples=resamples)
            method = "paired_bootstrap" if paired else "unpaired_bootstrap"
            interval = percentile_interval(draws, method)
            low, high = interval.low, interval.high
        out.append(Comparison(name, GROUP, "share", mean_a, mean_b, low, high, True, method=method))
    return out


__all__ = ["judged_block", "judged_comparisons", "judged_values"]
