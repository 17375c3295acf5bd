"""Compare two runs metric by metric, saying which differences are significant.

Two runs over the same tasks are compared **paired by task**: both runs' tasks are
resampled together (the same draw of tasks for A and B, 2000 times with a fixed seed), the
metric is recomputed on each side from the drawn tasks' episodes, and the 2.5 and 97.5
percentiles of ``B - A`` form a 95% interval. Pairing removes the task-to-task variation
both runs share (an easy task is easy for both), so a real difference shows with far fewer
tasks than two independent intervals would need. When the runs share only some tasks the
comparison is restricted to the shared ones (and says how many were left out). Only runs
over disjoint task sets are compared unpaired: each run's tasks resampled on their own.

A difference is significant when its interval excludes 0. The success rate of paired runs
is judged by an exact paired test instead: a sign test over tasks (tasks where B's success
rate beat A's against the reverse; over tasks run once each, McNemar's exact test),
significant at p < 0.05.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.report.comparison import Comparison
from agentunit_gym.eval.report.judged import judged_comparisons
from agentunit_gym.eval.report.metrics import Episode, MetricDef, compute_metrics, definitions, group_by_task, succeeded
from agentunit_gym.eval.report.stats import DEFAULT_BOOTSTRAP, difference_draws, sign_test
from agentunit_gym.eval.report.summary import load_episodes

RESAMPLES = DEFAULT_BOOTSTRAP

TaskKey = tuple[str, str]


@dataclass(frozen=True)
class Pairing:
    """How two runs' tasks line up."""

    kind: Literal["paired", "unpaired"]
    tasks: int
    """Tasks compared (shared ones when paired)."""
    only_a: int
    """Tasks only run A has (left out of a paired comparison)."""
    only_b: int


def _task_units(defn: MetricDef, episodes: list[Episode], tasks: list[TaskKey]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per task (in ``tasks`` order): the numerator and denominator the metric sums.

    A rate or mean: the task's sum and episode count; a ratio: its numerators' and
    denominators' sums; a total: its sum (denominator unused); a task-level metric: its
    per-task value over 1. Tasks the metric does not count for get 0 / 0.
    """
    groups = group_by_task(episodes)
    num = np.zeros(len(tasks))
    den = np.zeros(len(tasks))
    found = False
    for i, key in enumerate(tasks):
        eps = groups.get(key, [])
        if defn.kind == "task":
            assert defn.per_task is not None
            value = defn.per_task(eps) if eps else None
            if value is not None:
                num[i], den[i], found = float(value), 1.0, True
            continue
        assert defn.extract is not None
        for e in eps:
            v = defn.extract(e)
            if v is None:
                continue
            found = True
            if defn.kind == "ratio":
                num[i] += float(v[0])
                den[i] += float(v[1])
            else:
                num[i] += float(v)
                den[i] += 1.0
    return (num, den) if found else None


def pairing(a: list[Episode], b: list[Episode]) -> Pairing:
    """Whether two runs are compared paired (they share tasks) or unpaired (disjoint tasks)."""
    ta, tb = set(group_by_task(a)), set(group_by_task(b))
    shared = ta & tb
    if shared:
        return Pairing("paired", len(shared), len(ta - tb), len(tb - ta))
    return Pairing("unpaired", len(ta) + len(tb), len(ta), len(tb))


def success_sign_test(a: list[Episode], b: list[Episode]) -> float:
    """The exact paired test of the success rate: a sign test over the shared tasks, each task
    scored by its success rate over its repeats (ties dropped)."""
    ga, gb = group_by_task(a), group_by_task(b)
    wins = losses = 0
    for key in set(ga) & set(gb):
        ra = np.mean([succeeded(e.trace) for e in ga[key]])
        rb = np.mean([succeeded(e.trace) for e in gb[key]])
        wins += int(rb > ra)
        losses += int(ra > rb)
    return sign_test(wins, losses)


def compare_episodes(a: list[Episode], b: list[Episode], *, seed: int = 0) -> list[Comparison]:
    """Every metric of two sets of episodes, with a bootstrap interval of the difference, paired
    by task when they share tasks (restricted to the shared ones), unpaired when disjoint.

    Args:
        a: the baseline's episodes.
        b: the candidate's episodes.
        seed: seeds the resampling.

    Returns:
        One comparison per catalog metric (pass@k for the repeats both runs have).
    """
    how = pairing(a, b)
    if how.kind == "paired":
        shared = set(group_by_task(a)) & set(group_by_task(b))
        a = [e for e in a if e.task_key in shared]
        b = [e for e in b if e.task_key in shared]
    ta, tb = compute_metrics(a, seed=seed), compute_metrics(b, seed=seed)
    max_k = min(_max_k(a), _max_k(b))
    tasks_a, tasks_b = sorted(group_by_task(a)), sorted(group_by_task(b))
    if how.kind == "paired":
        tasks_b = tasks_a
    method = f"{how.kind}_bootstrap"
    p_success = success_sign_test(a, b) if how.kind == "paired" else None
    out: list[Comparison] = []
    for defn in definitions(max_k):
        va, vb = ta.value(defn.name), tb.value(defn.name)
        low = high = None
        ua, ub = _task_units(defn, a, tasks_a), _task_units(defn, b, tasks_b)
        if va is not None and vb is not None and ua is not None and ub is not None:
            total = defn.kind not in ("task", "ratio") and defn.scale == "sum"
            sides = [(num, None if total else den) for num, den in (ua, ub)]
            # One seed per metric: each metric's interval does not depend on which metrics came before.
            diffs = difference_draws(sides[0], sides[1], paired=how.kind == "paired",
                                     rng=np.random.default_rng(seed), resamples=RESAMPLES)
            diffs = diffs[~np.isnan(diffs)]
            if diffs.size:
                low, high = (float(x) for x in np.percentile(diffs, [2.5, 97.5]))
        has_both = va is not None and vb is not None
        out.append(Comparison(defn.name, defn.group, defn.unit, va, vb, low, high, defn.higher_is_better,
                              method=method if has_both else "",
                              p_value=p_success if defn.name == "success_rate" and has_both else None))
    return out


def _max_k(episodes: list[Episode]) -> int:
    groups = group_by_task(episodes)
    return min((len(g) for g in groups.values()), default=1)


def compare_runs(run_a: Path, run_b: Path, *, seed: int = 0) -> list[Comparison]:
    """Compare the runs in two run directories (see :func:`compare_episodes`).

    Raises:
        ConfigError: a directory is not a run.
    """
    sets = []
    for run in (run_a, run_b):
        if not (run / "episodes.jsonl").exists():
            raise ConfigError(f"{run} is not a run directory (no episodes.jsonl); give the --output of an eval.")
        sets.append(load_episodes(run)[1])

    # The judged metrics (goal fidelity, criteria) when both runs were judged; rows missing in one say n/a.
    return compare_episodes(sets[0], sets[1], seed=seed) + judged_comparisons(run_a, run_b, seed=seed)


def is_finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
