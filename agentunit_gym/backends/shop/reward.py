"""WebShop's reward for a purchase, with every part kept.

The formula (WebShop's ``engine/goal.py``)::

    reward = r_type * (n_att + n_opt + [price <= price_upper]) / (|U_att| + |U_opt| + 1)

- ``n_att``: goal attributes found in the product: a product attribute with
  ``token_set_ratio > 85``, else the attribute as a substring of the title, bullet points
  or description (lowercased).
- ``n_opt``: goal options matched by a chosen option: for each goal option, whether any
  chosen value has ``token_set_ratio > 85`` with it (colors normalised first: the first base
  color a value contains). Sizes are matched the same fuzzy way (``x-large`` matches
  ``large``), and nothing is credited from the title or texts. So ``n_opt`` never exceeds
  the number of goal options and the reward stays in [0, 1].
- ``r_type``: 1.0; 0.5 when neither the query, nor at least two breadcrumb parts, nor
  more than 20% of the goal title's nouns match; 0.1 when that noun share is under 0.1;
  0.0 when it is 0.

One difference, documented and measured in docs/envs/webshop.md ("The type reward's
nouns"): WebShop finds the nouns of a title with spaCy's part-of-speech tagger; we take the
title's alphabetic words minus stopwords, colors and a short list of non-noun title words
(no spaCy model is published on PyPI by its authors; on search hits ``r_type`` agrees with
spaCy's on every measured purchase, on random products on 96.9%). ``token_set_ratio`` is
thefuzz's pure-Python form (difflib); with python-Levenshtein installed thefuzz scores with
that library instead, which can differ by a point near the 85 threshold.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from agentunit_gym.backends.shop.catalog import Product

COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)
"""WebShop's base colors, in its order (the first contained one wins)."""

_STOPWORDS = frozenset(
    "a an and are as at be by for from in into is it of on or the to with without your you our this that "
    "pack set count piece pcs".split()
)
_NON_NOUNS = frozenset(
    "classic essential soft everyday vintage new premium best large small medium mini ultra slim heavy duty "
    "long short high low light lightweight compact portable modern rustic casual elegant great "
    "original natural organic free wireless".split()
)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def normalize_color(value: str) -> str:
    """The first WebShop base color contained in ``value``, else ``value`` unchanged."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def _process(text: str) -> str:
    """thefuzz's ``full_process``: lowercase, non-alphanumerics to spaces, trimmed."""
    return " ".join(re.sub(r"(?ui)\W", " ", text).lower().split())


def _ratio(a: str, b: str) -> int:
    if not a and not b:
        return 100
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a: str, b: str) -> int:
    """thefuzz's ``token_set_ratio`` (its pure-Python form, on difflib), 0-100."""
    pa, pb = _process(a), _process(b)
    if not pa or not pb:
        return 0
    ta, tb = set(pa.split()), set(pb.split())
    common = " ".join(sorted(ta & tb))
    only_a = " ".join(sorted(ta - tb))
    only_b = " ".join(sorted(tb - ta))
    combined_a = f"{common} {only_a}".strip()
    combined_b = f"{common} {only_b}".strip()
    return max(_ratio(common, combined_a), _ratio(common, combined_b), _ratio(combined_a, combined_b))


def title_nouns(title: str) -> list[str]:
    """The words of a title standing in for its nouns (see the module note)."""
    words = _WORD.findall(title.lower())
    return [w for w in words if len(w) > 1 and w not in _STOPWORDS and w not in _NON_NOUNS and w not in COLOR_SET]


@dataclass(frozen=True)
class GoalSpec:
    """What the reward compares a purchase with (WebShop's goal dict)."""

    asin: str
    name: str
    """The target product's title (WebShop's goal ``name``)."""
    query: str
    product_category: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    """Goal option values (WebShop's ``goal_options`` values)."""
    price_upper: float
    instruction: str = ""
    """The instruction shown to the shopper (not part of the reward)."""


@dataclass(frozen=True)
class RewardBreakdown:
    """Every part of the reward, named as in WebShop's verbose info where it has one."""

    reward: float
    raw_reward: float
    """The same as ``reward`` (kept for readers of older results, where the reward was clipped)."""
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    r_att: float
    num_attr_matches: int
    r_option: float | None
    num_option_matches: int
    r_price: bool | None
    w_att: float
    w_option: float
    w_price: float

    def components(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def type_reward(product: Product, goal: GoalSpec) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)``."""
    query_match = product.query.lower().strip() == goal.query.lower().strip()
    bought = {x.strip() for x in product.product_category.split("›")}
    wanted = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought & wanted) >= 2
    desired = title_nouns(goal.name)
    purchased = set(title_nouns(product.title))
    title_score = 0.2 if not desired else len(purchased & set(desired)) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def _in_text(value: str, product: Product) -> bool:
    return (value in product.title.lower() or value in " ".join(product.bullet_points).lower()
            or value in product.description.lower())


def attribute_matches(product: Product, attributes: tuple[str, ...]) -> int:
    count = 0
    for wanted in attributes:
        if any(token_set_ratio(have, wanted) > 85 for have in product.attributes) or _in_text(wanted, product):
            count += 1
    return count


def option_matches(goal_options: tuple[str, ...], purchased: dict[str, str]) -> int:
    """How many goal options a chosen option matches (WebShop's ``get_option_reward``).

    For each goal option (color-normalised), one match when any chosen value
    (color-normalised) has ``token_set_ratio > 85`` with it; at most ``len(goal_options)``.
    """
    chosen = [normalize_color(v) for v in purchased.values()]
    count = 0
    for wanted in (normalize_color(o) for o in goal_options):
        if any(token_set_ratio(value, wanted) > 85 for value in chosen):
            count += 1
    return count


def compute_reward(product: Product, goal: GoalSpec, options: dict[str, str],
                   price: float | None = None) -> RewardBreakdown:
    """WebShop's reward for buying ``product`` with ``options`` chosen, against ``goal``.

    Args:
        product: the purchased product.
        goal: the goal.
        options: the chosen options, group -> value.
        price: the price paid (default: the product's price).
    """
    paid = product.price if price is None else price
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    n_att = attribute_matches(product, goal.attributes)
    n_opt = option_matches(goal.options, options)
    r_price: bool | None = paid <= goal.price_upper if goal.price_upper > 0 else None
    denominator = len(goal.attributes) + len(goal.options) + 1
    reward = (n_att + n_opt + int(bool(r_price))) / denominator * r_type
    return RewardBreakdown(
        reward=reward,
        raw_reward=reward,
        r_type=r_type,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
        r_att=n_att / len(goal.attributes) if goal.attributes else 0.0,
        num_attr_matches=n_att,
        r_option=n_opt / len(goal.options) if goal.options else None,
        num_option_matches=n_opt,
        r_price=r_price,
        w_att=len(goal.attributes) / denominator,
        w_option=len(goal.options) / denominator,
        w_price=1 / denominator,
    )
