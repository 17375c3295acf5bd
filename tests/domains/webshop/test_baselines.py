"""The WebShop baselines (domains/webshop/baselines.py) read the evaluator's reset seed through
the checking reader (core/info.py), as every agent should."""

from __future__ import annotations

import numpy as np
import pytest

from agentunit_gym.domains.webshop.baselines import RandomShopper
from agentunit_gym.errors import ConfigError

PAGE = 'Results\n\nAvailable Actions:\n{"has_search_bar": false, "clickables": ["back to search", "a", "b", "c", "d"]}'


def _clicks(shopper: RandomShopper, seed: object, n: int = 12) -> list[str]:
    shopper.reset({"seed": seed, "instruction": "a red shirt"})
    return [shopper.act(PAGE, {}) for _ in range(n)]


def test_the_same_seed_gives_the_same_clicks_whatever_its_integer_type() -> None:
    first = _clicks(RandomShopper(), 7)
    assert _clicks(RandomShopper(seed=99), np.int64(7)) == first
    assert _clicks(RandomShopper(), 8) != first


@pytest.mark.parametrize("seed", ["7", 7.0, True])
def test_a_seed_that_is_not_an_integer_is_refused(seed: object) -> None:
    with pytest.raises(ConfigError, match="must be an int"):
        RandomShopper().reset({"seed": seed})


def test_no_seed_keeps_the_shoppers_own() -> None:
    shopper = RandomShopper(seed=3)
    shopper.reset({"instruction": "a red shirt"})
    assert [shopper.act(PAGE, {}) for _ in range(5)] == _clicks(RandomShopper(), 3, 5)
