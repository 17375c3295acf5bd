"""Read WebShop's own data files: the same env over the real catalog, for users who have them.

The products are read by :func:`agentunit_gym.backends.shop.files.load_webshop_catalog`
(re-exported here); this module reads the human goals.

A WebShop data folder (``WebShop/data``) holds:

- ``items_shuffle.json`` (or ``items_shuffle_1000.json``): a JSON list of products with
  ``asin``, ``name``, ``full_description``, ``small_description`` (a list or a string),
  ``pricing`` (``"$12.99"`` or two prices), ``customization_options`` (group -> list of
  ``{"value", "image"}``, or null), ``category``, ``query``, ``product_category``.
- ``items_ins_v2.json`` (or ``items_ins_v2_1000.json``): ASIN -> ``{"attributes": [...],
  "instruction": ..., "instruction_attributes": [...]}``.
- ``items_human_ins.json``: ASIN -> a list of human goals ``{"instruction",
  "instruction_attributes", "instruction_options"}``.
- ``reviews.json`` (optional): a list of ``{"asin", "reviews": [...], "average_rating"}``.

Products are cleaned as WebShop's ``load_products`` does: ASINs ``nan`` or longer than 10
characters and repeated ASINs are skipped, option groups lowercased, option values
stripped, lowercased and with ``/`` written `` | ``, a missing price is $100.0, products
without attributes get ``DUMMY_ATTR``.

Human goals are numbered in WebShop's order (goals in product order, shuffled with
``random.seed(233)``), so ``webshop-human-00000`` is the goal AgentBench runs as sample 0.
WebShop draws a goal's price limit (and the price of a product listed with two prices)
without a seed; we draw them from a generator seeded by the ASIN, so they are stable.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from agentunit_gym.backends.shop.catalog import Catalog, Product
from agentunit_gym.backends.shop.files import load_webshop_catalog, read_json
from agentunit_gym.domains.webshop.goals import price_limit
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import TaskFileError

__all__ = ["load_webshop_catalog", "load_webshop_goals"]

HUMAN_FILE = "items_human_ins.json"
GOAL_SHUFFLE_SEED = 233


def load_webshop_goals(folder: str | Path, catalog: Catalog) -> list[WebShopTask]:
    """WebShop's human goals (``items_human_ins.json``) over ``catalog``, in WebShop's order.

    Each goal's reference solution searches the target's title, opens it, chooses each
    goal option the target offers, and buys; on real data it earns reward 1 only when
    the target itself satisfies the goal (most do, not all).

    Raises:
        TaskFileError: no human goals file, or one that does not parse.
    """
    path = Path(folder) / HUMAN_FILE
    if not path.is_file():
        raise TaskFileError(str(path), "no WebShop human goals file in this folder.")
    human = read_json(path, hashlib.sha256())
    if not isinstance(human, dict):
        raise TaskFileError(str(path), "expected an object mapping ASINs to lists of goals.")
    raw: list[tuple[Product, dict[str, Any]]] = []
    for index in range(len(catalog)):
        product = catalog.product(index)
        for goal in human.get(product.asin) or []:
            if isinstance(goal, dict) and goal.get("instruction_attributes"):
                raw.append((product, goal))
    random.Random(GOAL_SHUFFLE_SEED).shuffle(raw)
    tasks = []
    for number, (product, goal) in enumerate(raw):
        rng = random.Random(f"{product.asin}:{number}")
        upper = price_limit(rng, product.price)
        text = str(goal["instruction"]).strip(".")
        if upper < 1_000_000:
            text += f", and price lower than {upper:.2f} dollars"
        wanted = [str(o) for o in goal.get("instruction_options") or []]
        steps: list[dict[str, Any]] = [{"search": product.title.lower() or product.asin}, {"click": product.asin}]
        groups: dict[str, str] = {}
        for value in wanted:
            for name, values in product.options.items():
                if value.lower() in values and name not in groups:
                    groups[name] = value.lower()
                    steps.append({"click": value.lower()})
                    break
        steps.append({"click": "Buy Now"})
        tasks.append(WebShopTask.model_validate({
            "id": f"webshop-human-{number:05d}",
            "instruction": text,
            "category": product.category or "general",
            "asin": product.asin,
            "name": product.title,
            "query": product.query,
            "product_category": product.product_category,
            "attributes": [str(a) for a in goal["instruction_attributes"]],
            "goal_options": {str(i): v for i, v in enumerate(wanted)},
            "price_upper": upper,
            "catalog": "webshop-files",
            "reference_solution": steps,
            "source": f"{path}#{product.asin}",
        }))
    return tasks
