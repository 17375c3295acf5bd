"""The embedded shop engine: WebShop's pages and moves."""

from __future__ import annotations

from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.engine import EmbeddedShopBackend
from agentunit_gym.domains.webshop.goals import replay_reward
from agentunit_gym.domains.webshop.task import WebShopTask
from tests.domains.webshop import shop_conformance as conformance


def test_search_page(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask]) -> None:
    conformance.check_search_page(shop_backend, small_goals[0])


def test_results_paging(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask],
                        small_catalog: GeneratedCatalog) -> None:
    conformance.check_results_paging(shop_backend, small_goals[0], small_catalog)


def test_item_and_sub_pages(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask],
                            small_catalog: GeneratedCatalog) -> None:
    with_options = next(t for t in small_goals if t.goal_options)
    conformance.check_item_and_sub_pages(shop_backend, with_options, small_catalog)


def test_search_from_any_page(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask],
                              small_catalog: GeneratedCatalog) -> None:
    with_options = next(t for t in small_goals if t.goal_options)
    conformance.check_search_from_any_page(shop_backend, with_options, small_catalog)


def test_reference_purchases_earn_one(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask]) -> None:
    for task in small_goals[:10]:
        conformance.check_reference_purchase(shop_backend, task)


def test_generated_goals_are_varied_and_each_replays_to_one(shop_backend: EmbeddedShopBackend,
                                                            small_goals: list[WebShopTask]) -> None:
    assert len({t.id for t in small_goals}) == len(small_goals) == 40
    assert len({t.instruction.split()[0] for t in small_goals}) >= 4  # several phrasings
    assert len({t.category for t in small_goals}) == 5
    assert any(step.arguments == "Next >" for t in small_goals for step in t.reference_solution)
    for task in small_goals:
        assert f"{task.price_upper:.2f} dollars" in task.instruction
        assert replay_reward(shop_backend.shop, task) == 1.0


def test_buying_another_product_earns_partial_credit(shop_backend: EmbeddedShopBackend,
                                                     small_goals: list[WebShopTask],
                                                     small_catalog: GeneratedCatalog) -> None:
    task = next(t for t in small_goals if t.goal_options)
    target = small_catalog.get(task.asin)
    assert target is not None
    session = shop_backend.open_session(task.goal())
    session.search(target.title)
    session.click(task.asin)
    done = session.click("Buy Now").view  # no option chosen
    assert done.reward is not None and 0 < done.reward < 1
    parts = done.reward_components or {}
    assert parts["num_option_matches"] == 0 or parts["num_option_matches"] < len(task.goal_options)
    other = next(p for p in small_catalog if p.query != target.query and p.category != target.category)
    session = shop_backend.open_session(task.goal())
    session.search(other.title)
    session.click(other.asin)
    wrong = session.click("Buy Now").view
    assert wrong.reward is not None and wrong.reward < done.reward
