"""One metric of two runs, compared: the row ``compare`` prints and the judged metrics add to.

Its own module so that :mod:`agentunit_gym.eval.report.compare` and
:mod:`agentunit_gym.eval.report.judged` both build rows without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALPHA = 0.05
"""Significance level of the exact tests."""


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
    method: str = ""
    """``paired_bootstrap`` (tasks resampled together), ``unpaired_bootstrap`` (disjoint task
    sets, each run's tasks resampled on its own), or empty when a run lacks the metric."""
    p_value: float | None = None
    """The exact paired test's p-value (the success rate of paired runs), else None."""

    @property
    def diff(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def significant(self) -> bool:
        """The exact test's verdict where there is one (p < 0.05), else whether the interval
        excludes 0. (A percentile bootstrap over a handful of tasks that all moved the same
        way collapses to a point; the exact test does not claim more than the tasks show.)"""
        if self.p_value is not None:
            return self.p_value < ALPHA
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
                "significant": self.significant, "verdict": self.verdict, "method": self.method,
                "p_value": self.p_value}


__all__ = ["ALPHA", "Comparison"]
