"""Statistics for the metrics catalog: confidence intervals, pass@k, pass^k, significance.

Everything is deterministic: the bootstrap takes an explicit seed, so the same episodes
always give the same intervals. One vectorised bootstrap (:func:`bootstrap_draws`) serves
every interval and comparison; repeats of a task are resampled together (a cluster
bootstrap), since they are not independent.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from agentunit_gym.errors import ConfigError

Z_95 = 1.959963984540054
"""The two-sided 95% quantile of the standard normal."""

DEFAULT_BOOTSTRAP = 2000
"""Resamples for bootstrap intervals; 2000 keeps the 2.5/97.5 percentiles stable to ~0.01."""


@dataclass(frozen=True)
class Interval:
    """A 95% confidence interval and the method that produced it."""

    low: float
    high: float
    method: str
    """``wilson`` (independent episodes), ``wilson_clusters`` (an all-equal rate with repeats:
    Wilson over the tasks), ``bootstrap`` (over episodes, or over tasks for task-level
    metrics), ``cluster_bootstrap`` (whole tasks resampled: repeats present),
    ``stratified_bootstrap``, or ``exact`` (a degenerate sample)."""


def wilson(successes: int, n: int, z: float = Z_95) -> Interval:
    """The Wilson score interval for a binomial rate (``scipy.stats.binomtest``'s ``wilson``).

    Its centre is ``(p + z^2/2n) / (1 + z^2/n)`` and its half-width
    ``z * sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)``, for ``p = successes / n``.

    Args:
        successes: how many trials succeeded.
        n: how many trials.
        z: the normal quantile (1.96 for 95%).

    Returns:
        The interval; ``(0, 1)`` when ``n`` is 0.

    Raises:
        ConfigError: counts out of range.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ConfigError(f"wilson needs 0 <= successes <= n, got successes={successes}, n={n}.")
    if n == 0:
        return Interval(0.0, 1.0, "wilson")
    import scipy.stats  # here, not at the top: importing it takes seconds, and most runs need it once

    confidence = 1.0 - 2.0 * float(scipy.stats.norm.sf(z))
    ci = scipy.stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(float(ci.low), float(ci.high), "wilson")


Statistic = Literal["mean", "sum", "ratio"]


BLOCK_CELLS = 4_000_000
"""Resample-by-unit weights drawn per block at most (32 MB of float64): memory stays bounded."""


def resample_weights(units: int, *, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``(resamples, units)`` counts: how often each unit is drawn in each bootstrap replicate
    (``units`` draws with replacement per replicate, counted per unit)."""
    drawn = rng.integers(0, units, size=(resamples, units))
    offsets = (np.arange(resamples) * units)[:, None]
    counts = np.bincount((drawn + offsets).ravel(), minlength=resamples * units)
    return counts.reshape(resamples, units).astype(float)


def weighted_statistic(weights: np.ndarray, num: np.ndarray, den: np.ndarray | None) -> np.ndarray:
    """Per replicate (a row of ``weights``): ``(w @ num) / (w @ den)``, or ``w @ num`` when ``den``
    is None; NaN where the denominator is 0."""
    top: np.ndarray = weights @ num
    if den is None:
        return top
    bottom = weights @ den
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio: np.ndarray = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)
    return ratio


def _blocks(units: int, resamples: int) -> list[int]:
    size = max(1, min(resamples, BLOCK_CELLS // max(1, units)))
    return [min(size, resamples - start) for start in range(0, resamples, size)]


def bootstrap_draws(num: np.ndarray, den: np.ndarray | None, *, rng: np.random.Generator,
                    resamples: int = DEFAULT_BOOTSTRAP) -> np.ndarray:
    """Bootstrap replicates of ``sum(num) / sum(den)`` (or ``sum(num)`` when ``den`` is None),
    resampling whole units: the one bootstrap every interval uses.

    Vectorised: a replicate is a vector of counts ``w`` (:func:`resample_weights`) and its
    statistic ``(w @ num) / (w @ den)`` (:func:`weighted_statistic`). A unit is an episode,
    or a cluster of episodes summed beforehand (a task's repeats: the cluster bootstrap,
    see :func:`cluster_sums`); a mean is the ratio with episode counts as ``den``.

    Returns:
        ``resamples`` values; NaN where a replicate's denominator is 0.
    """
    parts = [weighted_statistic(resample_weights(num.shape[0], rng=rng, resamples=size), num, den)
             for size in _blocks(num.shape[0], resamples)]
    return np.concatenate(parts)


def difference_draws(a: tuple[np.ndarray, np.ndarray | None], b: tuple[np.ndarray, np.ndarray | None], *,
                     paired: bool, rng: np.random.Generator, resamples: int = DEFAULT_BOOTSTRAP) -> np.ndarray:
    """Bootstrap replicates of ``statistic(B) - statistic(A)`` (each as in :func:`bootstrap_draws`).

    ``paired``: ``a`` and ``b`` hold the same units (tasks) in the same order, and each
    replicate draws one set of units for both (a paired bootstrap: what the units share
    cancels). Otherwise each side's units are drawn on their own.
    """
    out = []
    if paired:
        if a[0].shape != b[0].shape:
            raise ConfigError(f"a paired bootstrap needs the same units on both sides, got {a[0].shape[0]} "
                              f"and {b[0].shape[0]}.")
        for size in _blocks(a[0].shape[0], resamples):
            weights = resample_weights(a[0].shape[0], rng=rng, resamples=size)
            out.append(weighted_statistic(weights, *b) - weighted_statistic(weights, *a))
        return np.concatenate(out)
    diff: np.ndarray = bootstrap_draws(*b, rng=rng, resamples=resamples) - bootstrap_draws(*a, rng=rng,
                                                                                         resamples=resamples)
    return diff


def percentile_interval(draws: np.ndarray, method: str) -> Interval:
    """The 2.5 and 97.5 percentiles of bootstrap ``draws`` (NaN draws dropped)."""
    values = draws[~np.isnan(draws)]
    if values.size == 0:
        return Interval(float("nan"), float("nan"), method)
    low, high = np.percentile(values, [2.5, 97.5])
    return Interval(float(low), float(high), method)


def cluster_sums(values: np.ndarray, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per-cluster numerator and denominator sums of ``values``.

    ``values`` is 1-D (one number per episode: the denominator counts episodes) or ``(n, 2)``
    (a numerator and a denominator per episode). Without ``clusters`` every episode is its
    own unit.

    Returns:
        ``(num, den, repeated)``: ``repeated`` is True when some cluster holds more than one episode.
    """
    data = np.asarray(values, dtype=float)
    if data.ndim == 1:
        data = np.column_stack([data, np.ones(data.shape[0])])
    if clusters is None:
        return data[:, 0], data[:, 1], False
    index: dict[Hashable, int] = {}
    ids = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64, count=data.shape[0])
    num = np.bincount(ids, weights=data[:, 0], minlength=len(index))
    den = np.bincount(ids, weights=data[:, 1], minlength=len(index))
    return num, den, len(index) < data.shape[0]


def bootstrap(
    samples: Sequence[float] | np.ndarray,
    statistic: Statistic = "mean",
    *,
    clusters: Sequence[Hashable] | None = None,
    seed: int = 0,
    resamples: int = DEFAULT_BOOTSTRAP,
) -> Interval:
    """A percentile bootstrap interval of the mean, total or ratio of ``samples``.

    With ``clusters`` (one label per sample, e.g. the task of each episode) whole clusters
    are resampled (a cluster bootstrap): repeats of one task are not independent, so the
    interval must not narrow as repeats grow while the tasks stay the same.

    Args:
        samples: one value per episode; ``(n, 2)`` rows ``[numerator, denominator]`` for ``ratio``.
        statistic: ``mean``, ``sum`` (the total) or ``ratio`` (``sum(num) / sum(den)``).
        clusters: the cluster of each sample, or None when samples are independent.
        seed: seeds numpy's generator.
        resamples: how many resamples.

    Returns:
        The 2.5 and 97.5 percentiles, method ``bootstrap`` or ``cluster_bootstrap`` (when a
        cluster holds repeats); the point itself (method ``exact``) when there is one unit
        or every sample is the same.

    Raises:
        ConfigError: an empty sample.
    """
    data = np.asarray(samples, dtype=float)
    if data.shape[0] == 0:
        raise ConfigError("bootstrap needs at least one sample.")
    num, den, repeated = cluster_sums(data, clusters)
    if num.shape[0] == 1 or bool(np.all(data == data[0])):
        point = float(num.sum()) if statistic == "sum" else _ratio(num.sum(), den.sum())
        return Interval(point, point, "exact")
    draws = bootstrap_draws(num, None if statistic == "sum" else den, rng=np.random.default_rng(seed),
                            resamples=resamples)
    return percentile_interval(draws, "cluster_bootstrap" if repeated else "bootstrap")


def rate_interval(hits: Sequence[bool] | np.ndarray, clusters: Sequence[Hashable] | None = None, *,
                  seed: int = 0, resamples: int = DEFAULT_BOOTSTRAP) -> Interval:
    """The 95% interval of a success rate: Wilson over episodes when they are independent, a
    cluster bootstrap over tasks when some task was repeated.

    When every outcome is the same (the bootstrap would collapse to a point), the Wilson
    interval over the number of clusters instead (method ``wilson_clusters``): with repeats,
    the tasks are the independent units.

    Raises:
        ConfigError: no outcome.
    """
    outcomes = np.asarray(hits, dtype=float)
    if outcomes.size == 0:
        raise ConfigError("rate_interval needs at least one outcome.")
    num, den, repeated = cluster_sums(outcomes, clusters)
    if not repeated:
        return wilson(int(outcomes.sum()), int(outcomes.size))
    if bool(np.all(outcomes == outcomes[0])):
        rate = float(outcomes[0])
        interval = wilson(round(rate * num.shape[0]), num.shape[0])
        return Interval(interval.low, interval.high, "wilson_clusters")
    draws = bootstrap_draws(num, den, rng=np.random.default_rng(seed), resamples=resamples)
    return percentile_interval(draws, "cluster_bootstrap")


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den > 0 else float("nan")


def ratio_of_sums(rows: np.ndarray) -> float:
    """``sum(numerators) / sum(denominators)`` of an ``(n, 2)`` array; NaN when the denominator is 0."""
    den = float(rows[:, 1].sum())
    return float(rows[:, 0].sum()) / den if den > 0 else float("nan")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator: the chance that at least one of k draws (without
    replacement) from n attempts with c successes succeeds, ``1 - C(n-c, k) / C(n, k)``.

    Raises:
        ConfigError: ``k`` larger than ``n`` or counts out of range.
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The pass^k estimator (consistency): the chance that all of k draws succeed, ``C(c, k) / C(n, k)``.

    Raises:
        ConfigError: ``k`` larger than ``n`` or counts out of range.
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ConfigError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")


def permutation_test(
    a: Sequence[float], b: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_BOOTSTRAP
) -> float:
    """Two-sided p-value of a difference in means by a seeded permutation test
    (``scipy.stats.permutation_test``).

    The statistic is ``|mean(a) - mean(b)|`` and the p-value the share of relabellings of the
    pooled samples whose statistic is at least the observed one: ``(hits + 1) / (resamples + 1)``
    over ``resamples`` random relabellings (the +1 correction, so the p-value is never 0), or
    exact over every relabelling when there are at most ``resamples`` of them.

    Raises:
        ConfigError: an empty sample.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise ConfigError("permutation_test needs two non-empty samples.")

    def distance(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        gap: np.ndarray = np.abs(x.mean(axis=axis) - y.mean(axis=axis))
        return gap

    import scipy.stats

    # `random_state`, not `rng` (scipy >= 1.15 only): pyproject allows scipy from 1.10.
    result = scipy.stats.permutation_test((xa, xb), distance, permutation_type="independent", vectorized=True,
                                          n_resamples=resamples, alternative="greater",
                                          random_state=np.random.default_rng(seed))
    return float(result.pvalue)


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided p-value of a sign test: ``wins`` units where B beat A and ``losses``
    where A beat B (ties dropped), under H0 that either is equally likely: the binomial test
    of ``wins`` in ``wins + losses`` at 1/2 (``scipy.stats.binomtest``), which is
    ``min(1, 2 * sum(C(n, i) for i <= min(wins, losses)) / 2^n)``.

    Over tasks with one run each this is McNemar's exact test on the discordant pairs.

    Raises:
        ConfigError: negative counts.
    """
    if wins < 0 or losses < 0:
        raise ConfigError(f"sign_test needs counts >= 0, got wins={wins}, losses={losses}.")
    if wins + losses == 0:
        return 1.0
    import scipy.stats

    return float(scipy.stats.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)
