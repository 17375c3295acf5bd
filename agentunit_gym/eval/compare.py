"""Compare two runs metric by metric, saying which differences are significant.

The test: a bootstrap of the difference. Each run's units (episodes; tasks for the repeat
metrics) are resampled independently, 2000 times with a fixed seed, the metric is
recomputed on both resamples, and the 2.5 and 97.5 percentiles of ``B - A`` form a 95%
interval. A difference is significant when that interval excludes 0. Unlike "the two
CIs do not overlap", which is too conservative (two intervals can overlap by a fair bit
while the difference is still significant), this tests the difference itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentunit_gym.eval.metrics import Episode, MetricDef, compute_metrics, definitions, group_by_task
from agentunit_gym.eval.summary import load_episodes

RESAMPLES = 2000


@dataclass(frozen=True)
class Comparison:
    """One metric in two runs."""

    name: str
    group: str
    unit: str
    a: float | None
    b: float | None
    diff_low: float | None
    diff_high: float | None
    higher_is_better: bool | None

    @property
    def diff(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def significant(self) -> bool:
        if self.diff_low is None or self.diff_high is None:
            return False
        return self.diff_low > 0 or self.diff_high < 0

    @property
    def verdict(self) -> str:
        """``better``, ``worse``, ``different`` (no preferred direction), ``same`` (not significant),
        or ``n/a`` (a run lacks the metric)."""
        if self.diff is None:
            return "n/a"
        if not self.significant:
            return "same"
        if self.higher_is_better is None:
            return "different"
        return "better" if (self.diff > 0) == self.higher_is_better else "worse"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "unit": self.unit, "a": self.a, "b": self.b,
                "diff": self.diff, "diff_low": self.diff_low, "diff_high": self.diff_high,
                "significant": self.significant, "verdict": self.verdict}


def _units(defn: MetricDef, episodes: list[Episode]) -> np.ndarray | None:
    """The per-unit values the metric aggregates: 1-D for rates and means, (n, 2) for ratios."""
    if defn.kind == "task":
        assert defn.per_task is not None
        values = [v for eps in group_by_task(episodes).values() if (v := defn.per_task(eps)) is not None]
        return np.asarray(values, dtype=float) if values else None
    assert defn.extract is not None
    raw = [v for e in episodes if (v := defn.extract(e)) is not None]
    if not raw:
        return None
    return np.asarray([float(v) for v in raw] if defn.kind == "rate" else raw, dtype=float)


def _resampled(defn: MetricDef, units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, units.shape[0], size=(RESAMPLES, units.shape[0]))
    sample = units[idx]
    if defn.kind == "ratio":
        num, den = sample[..., 0].sum(axis=1), sample[..., 1].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
        return ratio
    if defn.scale == "sum":
        total: np.ndarray = sample.sum(axis=1)
        return total
    mean: np.ndarray = sample.mean(axis=1)
    return mean


def compare_episodes(a: list[Episode], b: list[Episode], *, seed: int = 0) -> list[Comparison]:
    """Every metric of two sets of episodes, with a bootstrap interval of the difference.

    Args:
        a: the baseline's episodes.
        b: the candidate's episodes.
        seed: seeds the resampling.

    Returns:
        One comparison per catalog metric (pass@k for the repeats both runs have).
    """
    ta, tb = compute_metrics(a, seed=seed), compute_metrics(b, seed=seed)
    max_k = min(_max_k(a), _max_k(b))
    out: list[Comparison] = []
    rng = np.random.default_rng(seed)
    for defn in definitions(max_k):
        va, vb = ta.value(defn.name), tb.value(defn.name)
        low = high = None
        ua, ub = _units(defn, a), _units(defn, b)
        if va is not None and vb is not None and ua is not None and ub is not None:
            diffs = _resampled(defn, ub, rng) - _resampled(defn, ua, rng)
            diffs = diffs[~np.isnan(diffs)]
            if diffs.size:
                low, high = (float(x) for x in np.percentile(diffs, [2.5, 97.5]))
        out.append(Comparison(defn.name, defn.group, defn.unit, va, vb, low, high, defn.higher_is_better))
    return out


def _max_k(episodes: list[Episode]) -> int:
    groups = group_by_task(episodes)
    return min((len(g) for g in groups.values()), default=1)


def compare_runs(run_a: Path, run_b: Path, *, seed: int = 0) -> list[Comparison]:
    """Compare the runs in two run directories (see :func:`compare_episodes`).

    Raises:
        ConfigError: a directory is not a run.
    """
    from agentunit_gym.errors import ConfigError

    sets = []
    for run in (run_a, run_b):
        if not (run / "episodes.jsonl").exists():
            raise ConfigError(f"{run} is not a run directory (no episodes.jsonl); give the --output of an eval.")
        sets.append(load_episodes(run)[1])
    from agentunit_gym.eval.judge.metrics import judged_comparisons

    # The judged metrics (goal fidelity, criteria) when both runs were judged; rows missing in one say n/a.
    return compare_episodes(sets[0], sets[1], seed=seed) + judged_comparisons(run_a, run_b, seed=seed)


def is_finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
