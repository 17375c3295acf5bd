"""WebShop's own files, written small in their format: the same env over them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.domains.webshop.env import WebShopEnv
from agentunit_gym.domains.webshop.loader import load_webshop_catalog, load_webshop_goals
from agentunit_gym.errors import TaskFileError

PRODUCTS = [
    {"asin": "B000TEST01", "name": "Sunny Meadow Lavender Shampoo, Sulfate Free, 16 Fl Oz",
     "full_description": "A gentle shampoo with lavender oil.", "small_description": ["Sulfate free", "Vegan"],
     "pricing": "$12.99", "category": "beauty", "query": "Sulfate Free Shampoo ",
     "product_category": "Beauty & Personal Care › Hair Care › Shampoos",
     "customization_options": {"Size": [{"value": "8 fl oz", "image": None}, {"value": "16 Fl Oz/Pack", "image": None}],
                               "Scent": None}},
    {"asin": "B000TEST02", "name": "Oak Ridge Walnut Bookshelf, 5 Tier",
     "full_description": "Five shelves of walnut.", "small_description": "Easy assembly",
     "pricing": "$80.00$120.00", "category": "furniture", "query": "bookshelf",
     "product_category": "Home & Kitchen › Furniture › Bookcases", "customization_options": None},
    {"asin": "B000TEST01", "name": "duplicate", "full_description": "", "small_description": "", "pricing": "",
     "category": "", "query": "", "product_category": "", "customization_options": None},
    {"asin": "nan", "name": "no asin", "full_description": "", "small_description": "", "pricing": "",
     "category": "", "query": "", "product_category": "", "customization_options": None},
    {"asin": "B000TEST03", "name": "Plain Mug", "full_description": "A mug.", "small_description": [],
     "pricing": None, "category": "furniture", "query": "mug", "product_category": "Home › Kitchen",
     "customization_options": {}},
]
ATTRIBUTES = {"B000TEST01": {"attributes": ["sulfate free", "vegan"]}, "B000TEST02": {"attributes": ["easy assembly"]}}
HUMAN = {
    "B000TEST01": [{"instruction": "i want a sulfate free lavender shampoo in 8 fl oz.",
                    "instruction_attributes": ["sulfate free"], "instruction_options": ["8 fl oz"]},
                   {"instruction": "skipped: no attributes", "instruction_attributes": [], "instruction_options": []}],
    "B000TEST02": [{"instruction": "i need an easy assembly walnut bookshelf",
                    "instruction_attributes": ["easy assembly"], "instruction_options": []}],
}
REVIEWS = [{"asin": "B000TEST01", "average_rating": 4.5,
            "reviews": [{"title": "Smells great", "stars": "5", "review": "Love the scent."}]}]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(PRODUCTS))
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(ATTRIBUTES))
    (tmp_path / "items_human_ins.json").write_text(json.dumps(HUMAN))
    (tmp_path / "reviews.json").write_text(json.dumps(REVIEWS))
    return tmp_path


def test_products_are_cleaned_as_webshop_does(data: Path) -> None:
    catalog = load_webshop_catalog(data)
    assert len(catalog) == 3  # duplicate and 'nan' skipped
    shampoo = catalog.get("b000test01")
    assert shampoo is not None
    assert shampoo.options == {"size": ("8 fl oz", "16 fl oz | pack")}  # lowercased, '/' -> ' | ', null dropped
    assert shampoo.query == "sulfate free shampoo"
    assert shampoo.attributes == ("sulfate free", "vegan") and shampoo.price == 12.99
    assert shampoo.rating == 4.5 and shampoo.reviews[0].score == 5 and shampoo.reviews[0].body == "Love the scent."
    shelf = catalog.get("B000TEST02")
    assert shelf is not None and shelf.price_range == (80.0, 120.0) and 80 <= shelf.price <= 120
    assert shelf.price_tag == "$80.00 to $120.00" and shelf.bullet_points == ("Easy assembly",)
    mug = catalog.get("B000TEST03")
    assert mug is not None and mug.price == 100.0 and mug.attributes == ("DUMMY_ATTR",)


def test_the_catalog_key_follows_the_file_contents(data: Path) -> None:
    first = load_webshop_catalog(data).key
    assert load_webshop_catalog(data).key == first
    (data / "items_ins_v2_1000.json").write_text(json.dumps({}))
    assert load_webshop_catalog(data).key != first


def test_human_goals_in_webshop_order(data: Path) -> None:
    catalog = load_webshop_catalog(data)
    goals = load_webshop_goals(data, catalog)
    assert len(goals) == 2  # the goal without attributes is skipped
    expected = [("B000TEST01", "i want a sulfate free lavender shampoo in 8 fl oz"),
                ("B000TEST02", "i need an easy assembly walnut bookshelf")]
    random.Random(233).shuffle(expected)
    assert [(g.asin, g.instruction.split(", and price")[0]) for g in goals] == expected
    shampoo = next(g for g in goals if g.asin == "B000TEST01")
    assert shampoo.instruction.endswith(f", and price lower than {shampoo.price_upper:.2f} dollars")
    assert shampoo.price_upper in (20.0, 30.0, 40.0, 50.0)
    assert [s.arguments for s in shampoo.reference_solution][1:] == ["B000TEST01", "8 fl oz", "Buy Now"]


def test_the_env_runs_over_webshop_files(data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTUNIT_CACHE_DIR", str(tmp_path / "cache"))
    with WebShopEnv(webshop_data=data) as env:
        assert len(env.tasks) == 2
        for task in env.tasks:
            env.reset(options={"task_id": task.id})
            for step in task.reference_solution:
                _, reward, terminated, _, info = env.step(env.render_action(step))
            assert terminated and info["finish_reason"] is FinishReason.COMPLETE
            assert reward == 1.0


def test_tasks_given_as_a_webshop_folder_switch_the_catalog(data: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.domains.webshop import DOMAIN

    monkeypatch.setenv("AGENTUNIT_CACHE_DIR", str(tmp_path / "cache"))
    assert DOMAIN.detect_format(data) == "webshop"
    assert [t.asin for t in DOMAIN.load_tasks(data).tasks] == [t.asin for t in load_webshop_goals(
        data, load_webshop_catalog(data))]
    with WebShopEnv(tasks=data) as env:
        assert env.shop_backend.product_count() == 3 and len(env.tasks) == 2


def test_missing_or_broken_files_say_which(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="no WebShop product file"):
        load_webshop_catalog(tmp_path)
    (tmp_path / "items_shuffle.json").write_text("{not json")
    with pytest.raises(TaskFileError, match="items_shuffle.json.*not valid JSON"):
        load_webshop_catalog(tmp_path)
    (tmp_path / "items_shuffle.json").write_text(json.dumps([{"name": "no asin"}]))
    with pytest.raises(TaskFileError, match="item 0"):
        load_webshop_catalog(tmp_path)
