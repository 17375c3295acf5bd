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
    assert r.num_option_matches == 2  # large ~ large; navy blue -> blue ~ blue
    assert r.r_price is True
    assert r.r_type == 1.0
    # (2 + 2 + 1) / (3 + 2 + 1) = 5/6
    assert r.reward == pytest.approx(5 / 6)
    assert r.w_att == pytest.approx(3 / 6) and r.w_option == pytest.approx(2 / 6) and r.w_price == pytest.approx(1 / 6)


def test_partial_credit_fuzzy_size_wrong_color_and_price_over() -> None:
    # Sizes are fuzzy too: "x-large" -> tokens {x, large} against {large}: the intersection "large"
    # equals one side whole, ratio 100 > 85, a match. red against blue: ratio 29, none.
    r = compute_reward(shirt(price=25.0), GOAL, {"size": "x-large", "color": "red"})
    assert r.num_option_matches == 1
    assert r.r_price is False
    assert r.r_option == 0.5
    # (2 + 1 + 0) / 6
    assert r.reward == pytest.approx(3 / 6)


def test_unchosen_options_earn_nothing() -> None:
    r = compute_reward(shirt(), GOAL, {})
    assert r.num_option_matches == 0
    assert r.reward == pytest.approx(3 / 6)  # 2 attributes + price


ONE_ATTRIBUTE = dict(asin="B0TEST0001", name="Acme Classic T-shirt For Men, Cotton", query="men's t-shirts",
                     product_category="Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
                     attributes=("cotton",), price_upper=20.0)
"""A goal with one attribute the shirt has (cotton) and a price it meets: each case below varies
the goal options alone, so the reward is (1 + n_opt + 1) / (1 + |goal options| + 1)."""


@pytest.mark.parametrize(("goal_options", "chosen", "n_opt", "reward"), [
    # WebShop 1.0: token_set_ratio("x-large", "large") = 100 ("large" is one side's whole token set).
    (("x-large",), {"size": "large"}, 1, 3 / 3),
    # WebShop 1.0: common "16 of ounce pack" (16 chars) against "16 of ounce pack 6" (18): 2*16/34 -> 94;
    # the two full strings 2*17/36 -> 94 > 85.
    (("16 ounce (pack of 2)",), {"size": "16 ounce (pack of 6)"}, 1, 3 / 3),
    # "32 ounce" against "12 ounce": "ounce 32" / "ounce 12" share 7 of 8 characters: 2*7/16 -> 88 > 85.
    (("32 ounce",), {"size": "12 ounce"}, 1, 3 / 3),
    # Colors are normalised before matching: navy blue -> blue.
    (("navy blue",), {"color": "blue"}, 1, 3 / 3),
    # WebShop 0.667: red is not blue (29), and the product's title saying "Red" earns nothing.
    (("blue",), {"color": "red"}, 0, 2 / 3),
    # A second goal option unmatched: large ~ large, medium against x-small no.
    (("large", "medium"), {"size": "large", "color": "x-small"}, 1, 3 / 4),
    # Extra chosen options (one of them a word of the title) add nothing: n_opt counts goal options.
    (("large",), {"size": "large", "color": "red", "style": "classic"}, 1, 3 / 3),
    # No option chosen, two wanted.
    (("large", "blue"), {}, 0, 2 / 4),
])
def test_option_reward_is_webshops_per_goal_option_fuzzy_match(goal_options: tuple[str, ...],
                                                                 chosen: dict[str, str], n_opt: int,
                                                                 reward: float) -> None:
    goal = GoalSpec(**ONE_ATTRIBUTE, options=goal_options)  # type: ignore[arg-type]
    r = compute_reward(shirt(title="Acme Classic Red T-shirt For Men, Cotton"), goal, dict(chosen))
    assert r.num_attr_matches == 1 and r.r_price is True and r.r_type == 1.0
    assert r.num_option_matches == n_opt
    assert r.r_option == pytest.approx(n_opt / len(goal_options))
    assert r.reward == pytest.approx(reward) and r.raw_reward == r.reward <= 1.0


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
