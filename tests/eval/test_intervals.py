"""Intervals that respect repeats, checked by their coverage on synthetic data of known
variance over many seeds (about 95%), and the paired comparison against the unpaired one."""

from __future__ import annotations

import numpy as np
import pytest

from agentunit_gym.eval.report.stats import (
    bootstrap,
    cluster_sums,
    difference_draws,
    percentile_interval,
    rate_interval,
    sign_test,
    wilson,
)

SEEDS = 400
"""Coverage over 400 seeds: its standard error is ~1.1 points around 95%."""


def covered(intervals: list[tuple[float, float]], truth: float) -> float:
    return float(np.mean([low <= truth <= high for low, high in intervals]))


def repeated_rates(rng: np.random.Generator, tasks: int, runs: int) -> tuple[np.ndarray, list[int]]:
    """Outcomes of ``runs`` repeats of ``tasks`` tasks whose success chances are uniform on
    [0, 1]: the population rate is 0.5, and the variance of the observed rate is
    ``Var(p)/T + E[p(1-p)]/(T R) = 1/(12 T) + 1/(6 T R)``, far above the ``1/(4 T R)`` a
    Wilson interval over episodes assumes."""
    p = rng.uniform(0.0, 1.0, size=tasks)
    hits = rng.random((tasks, runs)) < p[:, None]
    return hits.ravel(), [t for t in range(tasks) for _ in range(runs)]


def test_wilson_covers_independent_episodes() -> None:
    rng = np.random.default_rng(0)
    n, p = 60, 0.3
    intervals = []
    for _ in range(SEEDS):
        hits = int((rng.random(n) < p).sum())
        ci = wilson(hits, n)
        intervals.append((ci.low, ci.high))
    assert 0.92 <= covered(intervals, p) <= 0.98


def test_rate_interval_with_repeats_resamples_tasks_and_covers() -> None:
    rng = np.random.default_rng(1)
    tasks, runs = 40, 4
    cluster, per_episode = [], []
    for seed in range(SEEDS):
        hits, clusters = repeated_rates(rng, tasks, runs)
        ci = rate_interval(hits, clusters, seed=seed, resamples=1000)
        assert ci.method == "cluster_bootstrap"
        cluster.append((ci.low, ci.high))
        naive = wilson(int(hits.sum()), hits.size)
        per_episode.append((naive.low, naive.high))
    assert 0.91 <= covered(cluster, 0.5) <= 0.98
    # The Wilson interval over the 160 episodes treats repeats as independent: it covers ~83%.
    assert covered(per_episode, 0.5) < 0.88


def test_rate_interval_does_not_narrow_with_repeats() -> None:
    # The same 20 tasks (10 solved, 10 not, every time) run once and run 10 times: the
    # number of tasks is what bounds what we know, so the width must not shrink ~sqrt(10)x.
    once = rate_interval([True] * 10 + [False] * 10, list(range(20)))
    tenfold = rate_interval([t < 10 for t in range(20) for _ in range(10)],
                            [t for t in range(20) for _ in range(10)])
    assert once.method == "wilson" and tenfold.method == "cluster_bootstrap"
    assert (tenfold.high - tenfold.low) > 0.8 * (once.high - once.low)
    # All outcomes equal with repeats: Wilson over the tasks, not a zero-width interval.
    allfail = rate_interval([False] * 30, [t for t in range(10) for _ in range(3)])
    assert allfail.method == "wilson_clusters" and allfail.low == 0.0
    assert allfail.high == pytest.approx(wilson(0, 10).high)


def test_mean_cluster_bootstrap_covers_with_task_effects() -> None:
    # x = task effect (sd 1) + noise (sd 1); the mean's variance is 1/T + 1/(T R).
    rng = np.random.default_rng(2)
    tasks, runs = 40, 3
    cluster, per_episode = [], []
    labels = [t for t in range(tasks) for _ in range(runs)]
    for seed in range(SEEDS):
        x = (rng.normal(0.0, 1.0, tasks)[:, None] + rng.normal(0.0, 1.0, (tasks, runs))).ravel()
        ci = bootstrap(x, clusters=labels, seed=seed, resamples=1000)
        assert ci.method == "cluster_bootstrap"
        cluster.append((ci.low, ci.high))
        naive = bootstrap(x, seed=seed, resamples=1000)
        per_episode.append((naive.low, naive.high))
    assert 0.91 <= covered(cluster, 0.0) <= 0.98
    assert covered(per_episode, 0.0) < 0.85


def test_paired_difference_covers_and_is_narrower_than_unpaired() -> None:
    # Two agents on the same 40 tasks: a shared task difficulty (sd 1), agent B better by 0.3,
    # per-episode noise (sd 0.5), 2 runs each.
    rng = np.random.default_rng(3)
    tasks, runs, delta = 40, 2, 0.3
    labels = [t for t in range(tasks) for _ in range(runs)]
    paired, widths_paired, widths_unpaired = [], [], []
    for seed in range(SEEDS // 2):
        difficulty = rng.normal(0.0, 1.0, tasks)[:, None]
        a = (difficulty + rng.normal(0.0, 0.5, (tasks, runs))).ravel()
        b = (difficulty + delta + rng.normal(0.0, 0.5, (tasks, runs))).ravel()
        sa, sb = cluster_sums(a, labels), cluster_sums(b, labels)
        draws = difference_draws(sa[:2], sb[:2], paired=True, rng=np.random.default_rng(seed))
        ci = percentile_interval(draws, "paired")
        paired.append((ci.low, ci.high))
        widths_paired.append(ci.high - ci.low)
        unpaired = percentile_interval(
            difference_draws(sa[:2], sb[:2], paired=False, rng=np.random.default_rng(seed)), "unpaired")
        widths_unpaired.append(unpaired.high - unpaired.low)
    assert 0.90 <= covered(paired, delta) <= 0.99
    # The shared difficulty cancels when paired: about a third of the unpaired width here.
    assert np.mean(widths_paired) < 0.5 * np.mean(widths_unpaired)


def test_sign_test_is_exact() -> None:
    # 9 tasks where B won, 1 where A won: 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * 11 / 1024.
    assert sign_test(9, 1) == pytest.approx(22 / 1024)
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(5, 5) == 1.0 and sign_test(0, 0) == 1.0
    # Its false-positive rate under H0 stays under 5% (it is exact, so conservative).
    rng = np.random.default_rng(4)
    wins = rng.binomial(20, 0.5, size=2000)
    assert np.mean([sign_test(int(w), 20 - int(w)) < 0.05 for w in wins]) <= 0.05


def test_compare_pairs_runs_by_task_and_unpairs_disjoint_sets() -> None:
    from agentunit_gym.eval.report.compare import compare_episodes, pairing
    from agentunit_gym.eval.report.metrics import Episode
    from tests.eval.tracekit import step, trace

    def episodes(prefix: str, solved: set[int], runs: int = 2) -> list[Episode]:
        return [Episode(trace(f"{prefix}{t}", [step(1, tool="answer", arg="x")], success=t in solved), run=r)
                for t in range(12) for r in range(runs)]

    a = episodes("t", solved={0, 1, 2})
    b = episodes("t", solved=set(range(11)))  # B solves 8 more tasks, loses none
    rows = {c.name: c for c in compare_episodes(a, b, seed=1)}
    success = rows["success_rate"]
    assert success.method == "paired_bootstrap" and success.verdict == "better"
    assert success.p_value == pytest.approx(2 / 2**8)  # sign test: 8 wins, 0 losses
    assert success.diff == pytest.approx(8 / 12)
    same = {c.name: c for c in compare_episodes(a, a, seed=1)}["success_rate"]
    assert (same.diff_low, same.diff_high, same.p_value) == (0.0, 0.0, 1.0)  # paired: nothing varies
    other = episodes("u", solved=set(range(11)))
    assert pairing(a, other).kind == "unpaired"
    unpaired = {c.name: c for c in compare_episodes(a, other, seed=1)}["success_rate"]
    assert unpaired.method == "unpaired_bootstrap" and unpaired.p_value is None
    assert unpaired.diff_low is not None and unpaired.diff_low > 0


def test_a_few_tasks_moving_together_are_not_enough_for_the_exact_test() -> None:
    from agentunit_gym.eval.report.compare import compare_episodes
    from agentunit_gym.eval.report.metrics import Episode
    from tests.eval.tracekit import step, trace

    def run(solved: bool) -> list[Episode]:
        return [Episode(trace(f"t{t}", [step(1, tool="answer", arg="x")], success=solved), run=r)
                for t in range(3) for r in range(2)]

    success = {c.name: c for c in compare_episodes(run(False), run(True), seed=0)}["success_rate"]
    # Every replicate of 3 tasks gives +100 pp, but 3 wins of 3 has p = 2/8: not significant.
    assert (success.diff_low, success.diff_high) == (1.0, 1.0)
    assert success.p_value == pytest.approx(0.25) and not success.significant and success.verdict == "same"
