"""How far the WebShop reward's title nouns agree with WebShop's own (spaCy's tagger).

WebShop's type reward compares the nouns of the goal's title and of the bought product's
title, found by spaCy's part-of-speech tagger (``NOUN``/``PROPN``/``PNOUN``). Our reward
(``agentunit_gym/backends/shop/reward.py``) uses a word list instead. This tool measures, on
realistic purchases, how often ``r_type`` (and the title score it comes from) differs.

Two steps, because spaCy and its model are not dependencies of this project:

1. ``pairs`` (in the project's environment): for each of the 500 bundled goals, the 10
   products the shop's search returns for the goal's instruction; for each (goal, product)
   pair it writes the two titles, the query and category matches, and our noun lists::

       python tools/measure_title_nouns.py pairs --output pairs.json

2. ``compare`` (in any environment with spaCy and an English model, optionally TextBlob;
   imports nothing of this project): the type reward with each noun finder, and the share
   of pairs where each disagrees with spaCy's::

       python tools/measure_title_nouns.py compare pairs.json --spacy-model en_core_web_sm

The results are written down in docs/envs/webshop.md ("Differences from AgentBench").
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SPACY_NOUNS = ("PNOUN", "NOUN", "PROPN")
"""The tags WebShop's ``get_type_reward`` keeps."""
PENN_NOUNS = ("NN", "NNS", "NNP", "NNPS")


def make_pairs(output: Path, per_goal: int) -> int:
    """Step 1: the (goal, product) pairs with our side of the type reward."""
    from agentunit_gym.backends.shop.engine import Shop
    from agentunit_gym.backends.shop.reward import title_nouns, type_reward
    from agentunit_gym.core.registry import get_domain

    shop = Shop.open()
    goals = get_domain("webshop").bundled_tasks()
    rng = random.Random(0)
    rows: list[dict[str, Any]] = []
    for task in goals:
        goal = task.goal()  # type: ignore[attr-defined]
        query = re.split(r",? and price lower than", task.instruction)[0]
        hits = [("search", p) for p in shop.search(query)[:per_goal]]
        others = [("random", rng.randrange(len(shop.catalog))) for _ in range(per_goal)]
        for kind, position in hits + others:
            product = shop.catalog.product(position)
            r_type, query_match, category_match, title_score = type_reward(product, goal)
            rows.append({"goal": task.id, "kind": kind, "goal_title": goal.name, "title": product.title,
                         "query_match": query_match, "category_match": category_match,
                         "ours": {"goal_nouns": title_nouns(goal.name), "nouns": title_nouns(product.title),
                                  "title_score": title_score, "r_type": r_type}})
    output.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return len(rows)


def type_reward(desired: Iterable[str], purchased: Iterable[str], query_match: bool,
                category_match: bool) -> tuple[float, float]:
    """``(r_type, title_score)`` as WebShop's ``get_type_reward`` computes them from noun lists.

    The same rule as ``agentunit_gym.backends.shop.reward.type_reward``, restated on noun lists
    because ``compare`` runs in a spaCy environment that need not have agentunit-gym installed."""
    wanted, have = list(desired), set(purchased)
    title_score = 0.2 if not wanted else len(have & set(wanted)) / len(wanted)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, title_score


def _spacy_finder(model: str) -> Callable[[str], list[str]]:
    spacy = importlib.import_module("spacy")
    try:
        nlp = spacy.load(model)
    except OSError:
        nlp = importlib.import_module(model).load()  # a model packaged under another module name
    return lambda text: [t.text.lower() for t in nlp(text) if t.pos_ in SPACY_NOUNS]


def _textblob_finder() -> Callable[[str], list[str]]:
    from textblob.en.taggers import PatternTagger

    tagger = PatternTagger()
    return lambda text: [word.lower() for word, tag in tagger.tag(text) if tag in PENN_NOUNS]


def compare(pairs_file: Path, model: str) -> dict[str, Any]:
    """Step 2: agreement with spaCy's ``r_type`` and title score, per noun finder."""
    rows = json.loads(pairs_file.read_text(encoding="utf-8"))
    reference = _spacy_finder(model)
    finders: dict[str, Callable[[str], list[str]] | None] = {"ours (word list)": None}
    try:
        finders["textblob (PatternTagger)"] = _textblob_finder()
    except ImportError:
        pass
    cache: dict[tuple[str, str], list[str]] = {}

    def nouns(name: str, finder: Callable[[str], list[str]], text: str) -> list[str]:
        key = (name, text)
        if key not in cache:
            cache[key] = finder(text)
        return cache[key]

    report: dict[str, Any] = {"pairs": len(rows), "goals": len({r["goal"] for r in rows}), "reference": model}

    def side(name: str, finder: Callable[[str], list[str]] | None, row: dict[str, Any]) -> tuple[list[str], list[str]]:
        if finder is None:
            return row["ours"]["goal_nouns"], row["ours"]["nouns"]
        return nouns(name, finder, row["goal_title"]), nouns(name, finder, row["title"])

    for kind in sorted({r["kind"] for r in rows}):
        subset = [r for r in rows if r["kind"] == kind]
        ref = [side("spacy", reference, r) for r in subset]
        # As the reward runs (query and category matches count), and with the title alone
        # deciding (as when neither matches): the second isolates what the nouns change.
        actual = [type_reward(g, p, r["query_match"], r["category_match"])
                  for (g, p), r in zip(ref, subset, strict=True)]
        alone = [type_reward(g, p, False, False) for g, p in ref]
        part: dict[str, Any] = {"pairs": len(subset), "r_type_distribution_spacy": {
            str(v): sum(1 for r, _ in actual if r == v) for v in sorted({r for r, _ in actual})}}
        for name, finder in finders.items():
            sides = [side(name, finder, r) for r in subset]
            mine = [type_reward(g, p, r["query_match"], r["category_match"])
                    for (g, p), r in zip(sides, subset, strict=True)]
            mine_alone = [type_reward(g, p, False, False) for g, p in sides]
            part[name] = {
                "r_type_disagree_share": _share(a[0] != b[0] for a, b in zip(mine, actual, strict=True)),
                "r_type_by_title_alone_disagree_share": _share(
                    a[0] != b[0] for a, b in zip(mine_alone, alone, strict=True)),
                "title_score_disagree_share": _share(
                    abs(a[1] - b[1]) > 1e-9 for a, b in zip(mine, actual, strict=True)),
            }
        report[kind] = part
    return report


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return round(sum(values) / len(values), 4) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    pairs = sub.add_parser("pairs", help="step 1: the (goal, product) pairs, in this project's environment")
    pairs.add_argument("--output", type=Path, required=True)
    pairs.add_argument("--per-goal", type=int, default=10, help="search hits per goal (default 10: the first page)")
    cmp = sub.add_parser("compare", help="step 2: agreement with spaCy, where spaCy and a model are installed")
    cmp.add_argument("pairs", type=Path)
    cmp.add_argument("--spacy-model", default="en_core_web_sm")
    args = parser.parse_args(argv)
    if args.command == "pairs":
        print(f"{make_pairs(args.output, args.per_goal)} pairs written to {args.output}")
    else:
        print(json.dumps(compare(args.pairs, args.spacy_model), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
