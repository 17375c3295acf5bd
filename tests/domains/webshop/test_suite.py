"""The bundled goals: at least 500, over the 100k generated catalog, each solved by its reference.

Tests marked ``catalog`` need the 100k catalog's index (built once, about 10 s, then
cached under ~/.cache/agentunit-gym); the rest read only the suite file.
"""

from __future__ import annotations

from collections import Counter

import pytest

from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.engine import EmbeddedShopBackend, Shop
from agentunit_gym.backends.shop.factory import shared_shop
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.domains.webshop import DOMAIN
from agentunit_gym.domains.webshop.env import WebShopEnv
from agentunit_gym.domains.webshop.goals import generate_goals
from agentunit_gym.domains.webshop.task import WebShopTask


@pytest.fixture(scope="module")
def suite() -> list[WebShopTask]:
    return [t for t in DOMAIN.bundled_tasks() if isinstance(t, WebShopTask)]


def test_suite_size_ids_and_spread(suite: list[WebShopTask]) -> None:
    assert len(suite) >= 500
    assert len({t.id for t in suite}) == len(suite)
    assert len({t.asin for t in suite}) == len(suite)
    categories = Counter(t.category for t in suite)
    assert set(categories) == {"beauty", "electronics", "fashion", "food", "furniture"}
    assert min(categories.values()) >= 50
    assert all(t.catalog == "generated:0:100000" for t in suite)
    assert len({" ".join(t.instruction.split()[:2]) for t in suite}) >= 8  # varied phrasings
    assert all(f"{t.price_upper:.2f} dollars" in t.instruction for t in suite)
    assert sum(bool(t.goal_options) for t in suite) > 400
    for task in suite:
        catalog_index = GeneratedCatalog().index_of(task.asin)
        assert catalog_index is not None
        assert task.reference_solution[-1].arguments == "Buy Now"
        assert task.k_opt == len(task.reference_solution) <= (task.max_steps or 10)


@pytest.fixture(scope="module")
def full_shop() -> Shop:
    return shared_shop(GeneratedCatalog())


@pytest.mark.catalog
def test_the_suite_is_what_the_generator_makes_today(suite: list[WebShopTask], full_shop: Shop) -> None:
    # A changed generator or taxonomy must come with a regenerated suite (python -m
    # agentunit_gym.domains.webshop.goals --output agentunit_gym/domains/webshop/suite/goals.json).
    # The split and the family are filled in when the suite loads, not stored in the file.
    regenerated = generate_goals(full_shop, len(suite))
    stored = {"source", "split", "template"}
    assert [t.model_dump(exclude=stored) for t in regenerated] == [t.model_dump(exclude=stored) for t in suite]


@pytest.mark.catalog
def test_oracle_reward_one_on_every_goal_and_a_wrong_purchase_less(suite: list[WebShopTask],
                                                                   full_shop: Shop) -> None:
    with WebShopEnv(shop_backend=EmbeddedShopBackend(full_shop)) as env:
        assert len(env.tasks) == len(suite)
        for task in suite:
            env.reset(options={"task_id": task.id})
            for step in task.reference_solution:
                _, reward, terminated, truncated, info = env.step(env.render_action(step))
            assert terminated and not truncated and info["finish_reason"] is FinishReason.COMPLETE, task.id
            assert reward == 1.0 and info["score"]["success"], (task.id, info["score"])
        # negative control: a product of another type bought instead earns less than 1
        for task in suite[:50]:
            env.reset(options={"task_id": task.id})
            other = "wireless mouse" if task.query != "wireless mouse" else "olive oil"
            obs, *_ = env.step(f"Action: search[{other}]")
            env.step(f"Action: click[{obs.split(' [SEP] ')[5]}]")
            _, reward, terminated, _, info = env.step("Action: click[Buy Now]")
            assert terminated and reward < 1.0 and not info["score"]["success"], task.id
            assert info["score"]["components"]["r_type"] < 1.0
