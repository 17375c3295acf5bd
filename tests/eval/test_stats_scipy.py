"""stats.py's closed forms agree with scipy.stats, an independent implementation."""

from __future__ import annotations

import pytest
from scipy import stats as sp

from agentunit_gym.eval.stats import sign_test, wilson

COUNTS = [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (17, 40), (1, 200), (199, 200), (500, 1000)]


@pytest.mark.parametrize(("successes", "n"), COUNTS)
def test_wilson_matches_scipy(successes: int, n: int) -> None:
    expected = sp.binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    interval = wilson(successes, n)
    assert interval.low == pytest.approx(expected.low, abs=1e-4)
    assert interval.high == pytest.approx(expected.high, abs=1e-4)


@pytest.mark.parametrize(("wins", "losses"), [(0, 1), (1, 1), (0, 5), (2, 9), (9, 2), (15, 15), (3, 40), (60, 41)])
def test_sign_test_matches_scipys_exact_binomial_test(wins: int, losses: int) -> None:
    expected = sp.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue
    assert sign_test(wins, losses) == pytest.approx(expected, rel=1e-9)
