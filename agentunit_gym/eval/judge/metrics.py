"""Judged metrics of a run: goal fidelity, one metric per verified criterion, and how far the
judge agrees with the env's own check.

- ``goal_fidelity``: the mean over judged episodes of the judge's 0-1 score (AgentUnit's
  F_goal), with a bootstrap interval over episodes.
- ``criterion:<domain>/<category>/<name>``: the mean over that set's judged episodes of the
  criterion's 0-1 score (the accepted value's position, worst 0, best 1), bootstrap interval.
- ``judge_agreement``: the share of judged episodes whose judged ``achieved`` equals the env's
  ``score.success``, with a Wilson interval; ``judged_coverage``: the share of episodes the
  judge answered for (unjudged ones are never scored).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from agentunit_gym.eval.judge.run import JudgedEpisode, read_criteria, read_judged
from agentunit_gym.eval.metrics import MetricValue
from agentunit_gym.eval.stats import bootstrap, wilson

GROUP = "judge"


def _mean_metric(name: str, values: list[float], seed: int) -> MetricValue:
    if not values:
        return MetricValue(name, GROUP, None, None, 0, "share", True)
    return MetricValue(name, GROUP, float(np.mean(values)), bootstrap(values, seed=seed), len(values), "share", True)


def _rate_metric(name: str, hits: int, n: int) -> MetricValue:
    if n == 0:
        return MetricValue(name, GROUP, None, None, 0, "share", True)
    return MetricValue(name, GROUP, hits / n, wilson(hits, n), n, "share", True)


def judged_values(lines: list[JudgedEpisode]) -> dict[str, list[float]]:
    """Per judged metric, the per-episode values (the units the intervals and ``compare`` resample)."""
    out: dict[str, list[float]] = {"goal_fidelity": []}
    for line in lines:
        if line.status != "judged" or line.goal_fidelity is None:
            continue
        out["goal_fidelity"].append(line.goal_fidelity)
        for name, score in line.scores.items():
            out.setdefault(f"criterion:{line.criteria_set}/{name}", []).append(score)
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
    metrics["judge_agreement"] = _rate_metric("judge_agreement", agree, len(judged))
    total = len(keys) if keys is not None else len(lines)
    metrics["judged_coverage"] = _rate_metric("judged_coverage", len(judged), total)
    agreement = metrics["judge_agreement"].to_dict()
    agreement.update({
        "agree": agree,
        "judged_achieved_env_failed": sum(1 for x in judged if x.achieved and not x.success),
        "judged_failed_env_succeeded": sum(1 for x in judged if not x.achieved and x.success),
    })
    per_domain: dict[str, Any] = {}
    for domain in sorted({x.domain for x in lines}):
        subset = [x for x in lines if x.domain == domain]
        d_judged = [x for x in subset if x.status == "judged"]
        per_domain[domain] = {
            "goal_fidelity": _mean_metric("goal_fidelity", judged_values(subset)["goal_fidelity"], seed).to_dict(),
            "judge_agreement": _rate_metric("judge_agreement", sum(1 for x in d_judged if x.achieved == x.success),
                                            len(d_judged)).to_dict(),
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


def judged_comparisons(run_a: Path, run_b: Path, *, seed: int = 0, resamples: int = 2000) -> list[Any]:
    """``compare``'s rows for the judged metrics both runs have: a bootstrap of the difference of
    means, each run's episodes resampled independently (as the catalog's episode metrics are)."""
    from agentunit_gym.eval.compare import Comparison

    lines_a, lines_b = current_lines(run_a), current_lines(run_b)
    if not lines_a and not lines_b:
        return []
    va, vb = judged_values(lines_a), judged_values(lines_b)
    rng = np.random.default_rng(seed)
    out: list[Comparison] = []
    for name in sorted(set(va) | set(vb)):
        a, b = va.get(name) or [], vb.get(name) or []
        mean_a = float(np.mean(a)) if a else None
        mean_b = float(np.mean(b)) if b else None
        low = high = None
        if a and b:
            xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
            diffs = (xb[rng.integers(0, xb.size, size=(resamples, xb.size))].mean(axis=1)
                     - xa[rng.integers(0, xa.size, size=(resamples, xa.size))].mean(axis=1))
            low, high = (float(x) for x in np.percentile(diffs, [2.5, 97.5]))
        out.append(Comparison(name, GROUP, "share", mean_a, mean_b, low, high, True))
    return out


__all__ = ["judged_block", "judged_comparisons", "judged_values"]
