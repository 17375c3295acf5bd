"""stats.py's scipy.stats calls agree with the closed forms their docstrings give, computed here
by hand: the arguments (confidence level from z, alternative, statistic) are the ones meant."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from agentunit_gym.eval.report.stats import Z_95, permutation_test, sign_test, wilson

COUNTS = [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (17, 40), (1, 200), (199, 200), (500, 1000)]


def wilson_by_formula(successes: int, n: int, z: float) -> tuple[float, float]:
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize(("successes", "n"), COUNTS)
@pytest.mark.parametrize("z", [Z_95, 1.0, 2.5758293035489])
def test_wilson_matches_its_formula(successes: int, n: int, z: float) -> None:
    low, high = wilson_by_formula(successes, n, z)
    interval = wilson(successes, n, z)
    assert (interval.low, interval.high, interval.method) == (pytest.approx(low, abs=1e-9),
                                                              pytest.approx(high, abs=1e-9), "wilson")


def test_wilson_of_no_trial_is_everything() -> None:
    assert (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)


@pytest.mark.parametrize(("wins", "losses"), [(0, 1), (1, 1), (0, 5), (2, 9), (9, 2), (15, 15), (3, 40), (60, 41)])
def test_sign_test_matches_the_binomial_sum(wins: int, losses: int) -> None:
    n = wins + losses
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2.0**n
    assert sign_test(wins, losses) == pytest.approx(min(1.0, 2.0 * tail), rel=1e-9)


@pytest.mark.parametrize(("a", "b"), [([0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]), ([3.0, 5.0], [1.0, 2.0, 9.0]),
                                      ([1.0, 1.0, 1.0], [1.0, 1.0])])
def test_permutation_test_is_exact_over_few_relabellings(a: list[float], b: list[float]) -> None:
    # At most `resamples` relabellings: every one is tried, the share at least as far apart as observed.
    pooled = np.array(a + b)
    observed = abs(np.mean(a) - np.mean(b))
    gaps = []
    for chosen in itertools.combinations(range(pooled.size), len(a)):
        inside = np.zeros(pooled.size, dtype=bool)
        inside[list(chosen)] = True
        gaps.append(abs(pooled[inside].mean() - pooled[~inside].mean()))
    expected = np.mean([gap >= observed - 1e-12 for gap in gaps])
    assert permutation_test(a, b, resamples=1000) == pytest.approx(expected)


def test_permutation_test_is_seeded_with_the_plus_one_correction() -> None:
    a, b = [0.0] * 10, [1.0] * 10  # C(20, 10) relabellings: 500 sampled, 2 of them (this split, swapped) as far
    hits_plus_one = permutation_test(a, b, resamples=500) * 501
    assert hits_plus_one == pytest.approx(round(hits_plus_one)) and 1 <= round(hits_plus_one) <= 3
    assert permutation_test([0.0, 1.0] * 6, [1.0, 1.0, 0.0] * 4, seed=4) == permutation_test(
        [0.0, 1.0] * 6, [1.0, 1.0, 0.0] * 4, seed=4)
