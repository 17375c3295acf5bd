"""Goals over a generated catalog, each with the reference purchase that earns reward 1.

A goal picks a target product, asks for some of its attributes, one value of each of
its option groups (sometimes leaving a group open) and a price limit above its price
(WebShop's rule: two of the next four multiples of ten above the price, the larger one),
and phrases that in one of several instruction templates. Its reference solution is the
shop visit an ideal shopper makes: a search that lists the target (the first of a few
queries, from generic to the exact title, whose 50 hits contain it), ``Next >`` until
its page, the product, each goal option, ``Buy Now``. Every goal is replayed on the
embedded shop before it is kept, and must earn reward 1.

Generated goal sets (``agentunit-gym tasks generate --env WebShop-v0 -n N --seed S``) come
from :func:`generate`: goals over the default catalog with ids that name them
(``gen-webshop-<product type>-<hash of the goal>``), each target a different product, and with ``--split``
only products whose type's family (``webshop/<query>``, :func:`goal_family`) is in that
split, so a generated train goal never shares a product type with a bundled test goal.
One goal takes ~3 ms once the shop's index is open.

Regenerate the bundled suite after changing the catalog generator, in a source checkout
(nothing is written into the package unless its path is given)::

    python -m agentunit_gym.domains.webshop.goals --output agentunit_gym/domains/webshop/suite/goals.json
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentunit_gym.backends.shop.catalog import GeneratedCatalog, Product
from agentunit_gym.backends.shop.engine import PRODUCT_WINDOW, EmbeddedSession, Shop
from agentunit_gym.backends.shop.taxonomy import TYPES, ProductType
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import content_id
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import split_of_family

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
_ARTICLE = re.compile(r"\ba ([a-z0-9])")
_BY_QUERY = {t.query: t for t in TYPES}

_TEMPLATES = (
    "i need {article} {attrs} {kind}{opts}, and price lower than {price} dollars",
    "i am looking for {article} {kind} that is {attrs}{opts}, and price lower than {price} dollars",
    "find me {article} {attrs} {kind}{opts}, with a price lower than {price} dollars",
    "i want to buy {article} {kind} which is {attrs}{opts}, and price lower than {price} dollars",
    "i'm shopping for {article} {attrs} {kind}{opts} under {price} dollars",
    "get me {article} {kind}, {attrs}{opts}, and price lower than {price} dollars",
    "looking for {article} {attrs} {kind}{opts}, priced lower than {price} dollars",
    "please find {article} {kind} for me: {attrs}{opts}; it must cost less than {price} dollars",
    "buy {article} {attrs} {kind}{opts}, price lower than {price} dollars",
    "my budget is {price} dollars; i need {article} {kind} that is {attrs}{opts}",
)


def _option_phrase(name: str, value: str) -> str:
    if name == "color":
        return f"in {value} color"
    if name == "size":
        return f"in size {value}"
    if name in ("flavor", "scent"):
        return f"in the {value} {name}"
    return f"with {name}: {value}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def product_type(product: Product) -> ProductType | None:
    return _BY_QUERY.get(product.query)


def price_limit(rng: random.Random, price: float) -> float:
    above = [p for p in PRICE_STEPS if p > price][:4]
    if len(above) < 2:
        return 1_000_000.0
    return max(rng.sample(above, 2))


def make_goal(rng: random.Random, product: Product, number: int, catalog_ref: str) -> dict[str, Any]:
    """A goal (without its reference solution) for ``product``."""
    kind = product_type(product)
    kind_name = kind.name if kind is not None else product.query
    attributes = list(rng.sample(list(product.attributes), rng.randint(1, min(3, len(product.attributes)))))
    attributes.sort(key=product.attributes.index)
    options: dict[str, str] = {}
    for name, values in product.options.items():
        if rng.random() < 0.85:
            options[name] = rng.choice(values)
    price = price_limit(rng, product.price)
    opts = "".join(", " + _option_phrase(n, v) for n, v in options.items())
    template = rng.choice(_TEMPLATES)
    text = template.format(article="a", attrs=_join(attributes), kind=kind_name, opts=opts, price=f"{price:.2f}")
    text = _ARTICLE.sub(lambda m: ("an " if m.group(1) in "aeiou" else "a ") + m.group(1), text)
    return {
        "id": f"webshop-{number:04d}",
        "instruction": text,
        "category": product.category,
        "asin": product.asin,
        "name": product.title,
        "query": product.query,
        "product_category": product.product_category,
        "attributes": attributes,
        "goal_options": options,
        "price_upper": price,
        "catalog": catalog_ref,
        "labels": [product.category, kind_name],
    }


def reference_visit(shop: Shop, goal: dict[str, Any], product: Product) -> list[dict[str, Any]] | None:
    """The shop visit that buys the target with the goal's options; None if no query lists it."""
    catalog = shop.catalog
    kind = product_type(product)
    kind_name = kind.name if kind is not None else product.query
    queries = [
        " ".join([kind_name, *goal["attributes"], *goal["goal_options"].values()]),
        f"{product.title.split()[0].lower()} {kind_name}",
        product.title.lower(),
    ]
    target = catalog.index_of(product.asin)
    for query in queries:
        hits = shop.search(query)
        if target in hits:
            page = hits.index(target) // PRODUCT_WINDOW
            steps: list[dict[str, Any]] = [{"search": query}]
            steps += [{"click": "Next >"}] * page
            steps.append({"click": product.asin})
            steps += [{"click": value} for value in goal["goal_options"].values()]
            steps.append({"click": "Buy Now"})
            return steps
    return None


def goal_family(task: TaskSpec) -> str:
    """A goal's family: its product type (``webshop/<query>``). Every goal of one type is in one split."""
    query = getattr(task, "query", None)
    return f"webshop/{query}" if query else task.id


def generate_goals(shop: Shop, count: int, *, seed: int | str = 0, catalog_ref: str | None = None,
                   id_prefix: str | None = "webshop-", keep: Callable[[Product], bool] | None = None,
                   mark_split: bool = False) -> list[WebShopTask]:
    """``count`` goals over ``shop``'s catalog, each checked to earn reward 1 by its reference.

    Args:
        shop: the shop the goals are written for and replayed on.
        count: how many goals; each targets a different product.
        seed: seeds the draw of products, attributes, options, price limits and wording.
        catalog_ref: the ``catalog`` field of the goals (default: named after the shop's catalog).
        id_prefix: ids are ``<id_prefix><number>`` (4 digits for the bundled ``webshop-``, else 5); None:
            ids that name the goal (:func:`~agentunit_gym.tasks.overlap.content_id` of its family and
            its product, attributes, options, price limit and wording).
        keep: only products for which this is true are drawn (e.g. the types of one split).
        mark_split: write each goal's family (``webshop/<query>``) to ``template`` and its split to ``split``.

    Raises:
        ConfigError: the catalog (with ``keep``) cannot give ``count`` goals.
    """
    catalog = shop.catalog
    ref = catalog_ref
    if ref is None:
        ref = (f"generated:{catalog.seed}:{catalog.size}" if isinstance(catalog, GeneratedCatalog)
               else "webshop-files")
    rng = random.Random(seed)
    tasks: list[WebShopTask] = []
    used: set[int] = set()
    attempts = 0
    while len(tasks) < count:
        attempts += 1
        if attempts > count * 20 + 1000:
            raise ConfigError(f"only {len(tasks)} of {count} goals could be made from this catalog of "
                              f"{len(catalog)} products in {attempts - 1} draws; ask for fewer goals.")
        index = rng.randrange(len(catalog))
        if index in used:
            continue
        product = catalog.product(index)
        if keep is not None and not keep(product):
            continue
        goal = make_goal(rng, product, len(tasks), ref)
        if id_prefix is None:
            drawn = [goal["catalog"], goal["asin"], goal["attributes"], sorted(goal["goal_options"].items()),
                     goal["price_upper"], goal["instruction"]]
            goal["id"] = content_id("webshop", f"webshop/{product.query}", drawn)
        elif id_prefix != "webshop-":
            goal["id"] = f"{id_prefix}{len(tasks):05d}"
        if mark_split:
            goal["template"] = f"webshop/{product.query}"
            goal["split"] = split_of_family(goal["template"])
        steps = reference_visit(shop, goal, product)
        if steps is None:
            continue
        goal["reference_solution"] = steps
        goal["max_steps"] = max(10, len(steps) + 2)
        task = WebShopTask.model_validate(goal)
        if replay_reward(shop, task) < 1.0:
            continue
        used.add(index)
        tasks.append(task)
    return tasks


def replay_reward(shop: Shop, task: WebShopTask) -> float:
    """The reward the task's reference solution earns on ``shop`` (in process)."""
    session = EmbeddedSession(shop, task.goal())
    for step in task.reference_solution:
        argument = str(step.arguments)
        result = session.search(argument) if step.tool == "search" else session.click(argument)
        if result.refused is not None:
            return 0.0
    return float(session.view.reward or 0.0)


@functools.cache
def _default_shop() -> Shop:
    return Shop.open(GeneratedCatalog())


def generate(count: int, *, seed: int = 0, split: str | None = None) -> list[WebShopTask]:
    """``count`` goals over the default catalog (the WebShop domain's generator, see the module docstring).

    Each goal has ``template`` (its family, ``webshop/<query>``) and ``split`` set; with
    ``split`` only products of that split's families are drawn.

    Raises:
        ConfigError: more goals than the catalog gives.
    """
    shop = _default_shop()
    keep = None if split is None else (lambda product: split_of_family(f"webshop/{product.query}") == split)
    return generate_goals(shop, count, seed=f"gen-webshop:{seed}", id_prefix=None, keep=keep, mark_split=True)


def templates() -> tuple[str, ...]:
    """Every family of generated goals: one per product type of the catalog."""
    from agentunit_gym.backends.shop.taxonomy import TYPES

    return tuple(sorted({f"webshop/{t.query}" for t in TYPES}))


def main(argv: list[str] | None = None) -> int:
    """Write ``--count`` goals (default 500: the bundled suite) over the default catalog to ``--output``."""
    parser = argparse.ArgumentParser(prog="python -m agentunit_gym.domains.webshop.goals",
                                     description="Write goals over the default generated catalog (the bundled "
                                                 "suite's recipe). For generated training sets use "
                                                 "`agentunit-gym tasks generate --env WebShop-v0`.")
    parser.add_argument("--output", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--count", type=int, default=500, help="how many goals (default 500)")
    args = parser.parse_args(argv)
    shop = Shop.open(GeneratedCatalog())
    tasks = generate_goals(shop, args.count)
    out: Path = args.output
    out.parent.mkdir(parents=True, exist_ok=True)
    items = [t.model_dump(exclude_defaults=True, exclude={"source"}, mode="json") for t in tasks]
    out.write_text(json.dumps({"tasks": items}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(items)} goals to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
