"""Computing the catalog over episodes: one metric with its interval (:func:`evaluate`), the
whole table (:func:`compute_metrics`), a domain's headline with a stratified interval, and
AgentBench's finish-reason table.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentunit_gym.core.domain import Headline
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.eval.report.metrics.base import Episode, MetricDef, MetricValue
from agentunit_gym.eval.report.metrics.catalog import CATALOG, domain_definitions, headlines, repeat_definitions
from agentunit_gym.eval.report.stats import (
    DEFAULT_BOOTSTRAP,
    Interval,
    bootstrap,
    bootstrap_draws,
    cluster_sums,
    percentile_interval,
    rate_interval,
    ratio_of_sums,
)


def group_by_task(episodes: Iterable[Episode]) -> dict[tuple[str, str], list[Episode]]:
    groups: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    for e in episodes:
        groups[e.task_key].append(e)
    return dict(groups)


def evaluate(defn: MetricDef, episodes: Sequence[Episode], *, seed: int = 0) -> MetricValue:
    """One metric over ``episodes``.

    Args:
        defn: the metric.
        episodes: the episodes.
        seed: the bootstrap seed.

    Returns:
        The value with its interval; value None when no episode qualifies.
    """
    def result(value: float | None, ci: Interval | None, n: int) -> MetricValue:
        if value is not None and math.isnan(value):
            value, ci = None, None
        return MetricValue(defn.name, defn.group, value, ci, n, defn.unit, defn.higher_is_better)

    if defn.kind == "task":
        assert defn.per_task is not None
        values = [v for eps in group_by_task(episodes).values() if (v := defn.per_task(eps)) is not None]
        if not values:
            return result(None, None, 0)
        return result(float(np.mean(values)), bootstrap(values, seed=seed), len(values))
    assert defn.extract is not None
    pairs = [(e.task_key, v) for e in episodes if (v := defn.extract(e)) is not None]
    if not pairs:
        return result(None, None, 0)
    # Repeats of one task are resampled together (stats.cluster_sums finds them).
    clusters = [k for k, _ in pairs]
    raw = [v for _, v in pairs]
    if defn.kind == "rate":
        hits = sum(1 for v in raw if v)
        return result(hits / len(raw), rate_interval([bool(v) for v in raw], clusters, seed=seed), len(raw))
    if defn.kind == "ratio":
        rows = np.asarray(raw, dtype=float)
        value = ratio_of_sums(rows)
        return result(value, bootstrap(rows, "ratio", clusters=clusters, seed=seed) if not math.isnan(value)
                      else None, len(raw))
    values_f = np.asarray(raw, dtype=float)
    if defn.scale == "sum":
        return result(float(values_f.sum()), bootstrap(values_f, "sum", clusters=clusters, seed=seed), len(raw))
    return result(float(values_f.mean()), bootstrap(values_f, clusters=clusters, seed=seed), len(raw))


@dataclass
class MetricTable:
    """All metrics of one slice of episodes (a run, one env, one agent ...)."""

    metrics: dict[str, MetricValue] = field(default_factory=dict)
    episodes: int = 0

    def value(self, name: str) -> float | None:
        m = self.metrics.get(name)
        return m.value if m else None

    def to_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "metrics": {k: v.to_dict() for k, v in self.metrics.items()}}


def compute_metrics(episodes: Sequence[Episode], *, seed: int = 0) -> MetricTable:
    """Every catalog metric over ``episodes``, plus pass@k / pass^k for the repeats present,
    and every registered domain's metrics and headline (None when no episode of it is present).

    Args:
        episodes: finished episodes.
        seed: seeds every bootstrap interval.

    Returns:
        The table; metrics no episode qualifies for have value None.
    """
    table = MetricTable(episodes=len(episodes))
    groups = group_by_task(episodes)
    max_k = min((len(g) for g in groups.values()), default=1)
    for defn in (*CATALOG, *repeat_definitions(max_k), *domain_definitions()):
        table.metrics[defn.name] = evaluate(defn, episodes, seed=seed)
    for head in headlines():
        table.metrics[head.name] = headline_value(head, episodes, seed=seed)
    return table


def headline_value(head: Headline, episodes: Sequence[Episode], *, seed: int = 0) -> MetricValue:
    """A domain's headline over ``episodes``, with a stratified bootstrap interval.

    The value is ``head.combine`` of the per-stratum means (see
    :class:`~agentunit_gym.core.domain.Headline`); the interval resamples each stratum
    within itself (2000 draws) and combines the resampled means the same way.
    """
    members: dict[str, list[tuple[tuple[str, str], float]]] = {}
    for e in episodes:
        key = head.stratum(e.trace)
        if key is not None:
            members.setdefault(key, []).append((e.task_key, head.value(e.trace)))
    value = head.combine({k: float(np.mean([x for _, x in v])) for k, v in members.items()}) if members else None
    if value is None:
        return MetricValue(head.name, "domain", None, None, 0, head.unit, True)
    n = sum(len(v) for v in members.values())
    outcomes = [x for v in members.values() for _, x in v]
    if all(x == outcomes[0] for x in outcomes):
        ci = Interval(value, value, "exact")
    else:
        # Each stratum resampled within itself, by task (a task's repeats together), all
        # replicates at once; combine then applies per replicate (it is any function).
        rng = np.random.default_rng(seed)
        means = {}
        for key, rows in members.items():
            num, den, _ = cluster_sums(np.asarray([x for _, x in rows]), [k for k, _ in rows])
            means[key] = bootstrap_draws(num, den, rng=rng)
        draws = [head.combine({k: float(m[i]) for k, m in means.items()}) for i in range(DEFAULT_BOOTSTRAP)]
        ci = percentile_interval(np.asarray([d for d in draws if d is not None], dtype=float),
                                 "stratified_bootstrap")
    return MetricValue(head.name, "domain", value, ci, n, head.unit, True)


def finish_distribution(episodes: Sequence[Episode]) -> dict[tuple[str, str], dict[str, float]]:
    """The AgentBench table: per (env, agent), the share of episodes per finish reason.

    Returns:
        ``{(env, agent): {"Complete": share, "CLE": ..., "IF": ..., "IA": ..., "TLE": ..., "Error": ..., "n": count}}``
    """
    out: dict[tuple[str, str], dict[str, float]] = {}
    groups: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    for e in episodes:
        groups[(e.trace.env_id or e.trace.domain, e.agent)].append(e)
    for key, eps in sorted(groups.items()):
        counts = {r.abbreviation: 0 for r in FinishReason}
        for e in eps:
            counts[(e.trace.finish_reason or FinishReason.ERROR).abbreviation] += 1
        row = {k: v / len(eps) for k, v in counts.items()}
        row["n"] = float(len(eps))
        out[key] = row
    return out
