"""WebShop's reward against values worked out by hand, part by part."""

from __future__ import annotations

import pytest

from agentunit_gym.backends.shop.catalog import Product
from agentunit_gym.backends.shop.reward import (
    GoalSpec,
    compute_reward,
    normalize_color,
    title_nouns,
    token_set_ratio,
)


def shirt(**changes: object) -> Product:
    fields: dict[str, object] = dict(
        asin="B0TEST0001",
        title="Acme Classic T-shirt For Men, Cotton",
        category="fashion",
        query="men's t-shirts",
        product_category="Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
        price=18.5,
        bullet_points=("MACHINE WASH: easy care.",),
        description="A soft shirt that is pre-shrunk.",
        attributes=("cotton", "crew neck"),
        options={"size": ("small", "large", "x-large"), "color": ("navy blue", "red")},
    )
    fields.update(changes)
    return Product(**fields)  # type: ignore[arg-type]


GOAL = GoalSpec(
    asin="B0TEST0001",
    name="Acme Classic T-shirt For Men, Cotton",
    query="men's t-shirts",
    product_category="Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
    attributes=("cotton", "machine wash", "slim fit"),
    options=("large", "blue"),
    price_upper=20.0,
)


def test_token_set_ratio_by_hand() -> None:
    # One token set contains the other: the intersection alone compares equal to it.
    assert token_set_ratio("fuzzy was a bear", "fuzzy fuzzy was a bear") == 100
    # Nothing shared: ratio("abc", "abd") = 2 * 2 matching chars / 6 chars = 0.667 -> 67.
    assert token_set_ratio("abc", "abd") == 67
    assert token_set_ratio("", "abc") == 0
    assert token_set_ratio("Machine-Wash!", "machine wash") == 100


def test_normalize_color_takes_the_first_base_color_in_webshop_order() -> None:
    assert normalize_color("navy blue") == "blue"  # "blue" precedes "navy" in the list
    assert normalize_color("heather grey") == "grey"
    assert normalize_color("large") == "large"


def test_title_nouns_drop_stopwords_colors_and_adjectives() -> None:
    assert title_nouns("Acme Classic Red T-shirt for Men, Cotton") == ["acme", "shirt", "men", "cotton"]


def test_full_reward_when_everything_matches() -> None:
    r = compute_reward(shirt(), GOAL, {"size": "large", "color": "navy blue"})
    # attributes: cotton (attribute), machine wash (bullet text), slim fit: missing -> 2 of 3.
    assert r.num_attr_matches == 2
    assert r.num_option_matches == 2  # size exact; navy blue -> blue == blue
    assert r.r_price is True
    assert r.r_type == 1.0
    # (2 + 2 + 1) / (3 + 2 + 1) = 5/6
    assert r.reward == pytest.approx(5 / 6)
    assert r.w_att == pytest.approx(3 / 6) and r.w_option == pytest.approx(2 / 6) and r.w_price == pytest.approx(1 / 6)


def test_partial_credit_wrong_size_and_price_over() -> None:
    # size is exact-match only: x-large != large, and "x-large" is not in the texts.
    r = compute_reward(shirt(price=25.0), GOAL, {"size": "x-large", "color": "red"})
    assert r.num_option_matches == 0  # red is not blue; the title says nothing of red
    assert r.r_price is False
    assert r.r_option == 0.0
    # (2 + 0 + 0) / 6
    assert r.reward == pytest.approx(2 / 6)


def test_unchosen_options_earn_nothing() -> None:
    r = compute_reward(shirt(), GOAL, {})
    assert r.num_option_matches == 0
    assert r.reward == pytest.approx(3 / 6)  # 2 attributes + price


def test_option_found_in_the_title_counts() -> None:
    r = compute_reward(shirt(), GOAL, {"color": "cotton white"})  # fuzzy fails, "white" -> not in title
    assert r.num_option_matches == 0
    r = compute_reward(shirt(), GOAL, {"style": "classic"})  # fuzzy fails, but "classic" is in the title
    assert r.num_option_matches == 1


def test_type_reward_half_when_only_a_few_title_nouns_match() -> None:
    other = shirt(
        title="Zed Shirt Drawer Cabinet Lamp Shelf",
        query="bookshelf",
        product_category="Home & Kitchen › Furniture",
    )
    # goal nouns: acme, shirt, men, cotton (4); shared: shirt -> 1/4 = 0.25 > 0.2: still a match.
    assert compute_reward(other, GOAL, {}).r_type == 1.0
    goal = GoalSpec(**{**GOAL.__dict__, "name": "Acme Shirt Men Cotton Tee Crew"})
    r = compute_reward(other, goal, {})
    # 6 nouns, 1 shared: 1/6 = 0.167, in [0.1, 0.2], no query or category match -> 0.5.
    assert r.title_score == pytest.approx(1 / 6)
    assert (r.query_match, r.category_match) == (False, False)
    assert r.r_type == 0.5
    # attributes and texts are still the shirt's: cotton and machine wash match (2 of 3), no options
    # chosen, price 18.5 <= 20: 0.5 * (2 + 0 + 1) / 6.
    assert r.reward == pytest.approx(0.5 * 3 / 6)


def test_type_reward_small_and_zero_title_overlap() -> None:
    goal = GoalSpec(**{**GOAL.__dict__, "name": "Acme Shirt Men Cotton Tee Crew Polo Top Jersey Knit Blouse"})
    lamp = shirt(title="Zed Shirt Lamp", query="lamp", product_category="Home › Lighting")
    r = compute_reward(lamp, goal, {})
    assert r.title_score == pytest.approx(1 / 11)
    assert r.r_type == 0.1
    none = shirt(title="Zed Lamp", query="lamp", product_category="Home › Lighting")
    assert compute_reward(none, goal, {"size": "large"}).reward == 0.0


def test_category_match_needs_two_shared_breadcrumb_parts() -> None:
    goal = GoalSpec(**{**GOAL.__dict__, "name": "Acme Shirt Men Cotton Tee Crew"})
    near = shirt(title="Zed Shirt Lamp Desk Clock Vase", query="lamp",
                 product_category="Clothing, Shoes & Jewelry › Men › Watches")
    r = compute_reward(near, goal, {})
    assert r.category_match is True
    assert r.r_type == 1.0
