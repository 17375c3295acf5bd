"""The overlap keys and finder (agentunit_gym.tasks.overlap), the domains' keys, and the leak
they were built to catch: the five DB test tasks a generated train set held before issue 33."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from agentunit_gym.core.domain import import_object
from agentunit_gym.core.generation import task_items
from agentunit_gym.core.registry import get_domain
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import content_id, default_task_keys, find_overlap, mask_values
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import assign_splits

LEAKED = {"db-barley-03", "db-driving-07", "db-iowa-03", "db-iowa-04", "db-wheat-01"}
"""The DB test tasks whose reference SQL and gold answer generated train sets held (issue 33)."""


def _old_style(tasks: list[TaskSpec]) -> list[TaskSpec]:
    """The bundled tasks as they were before issue 33: no template, so each its own family."""
    return assign_splits(t.model_copy(update={"template": None, "split": None}) for t in tasks)


def test_masking_and_canonical_keys() -> None:
    assert mask_values('How many rows have site "Waseca" above 3.5?') == "how many rows have site <v> above #?"
    assert mask_values("Which languages are spoken in France and Spain?", ["France", "Spain"]) == \
        "which languages are spoken in <e> and <e>?"
    assert content_id("db", "gen-db/count-above", "SELECT 1") == content_id("db", "gen-db/count-above", "SELECT 1")
    assert content_id("db", "gen-db/count-above", "SELECT 1") != content_id("db", "gen-db/count-below", "SELECT 1")
    assert content_id("webshop", "webshop/women's sandals", 1).startswith("gen-webshop-women-s-sandals-")


def test_find_overlap_counts_each_key_and_lists_both_sides() -> None:
    a = [TaskSpec(id="x", instruction="Say 1."), TaskSpec(id="y", instruction="Do it."),
         TaskSpec(id="z", instruction="Say 2.")]
    b = [TaskSpec(id="y", instruction="Something else."), TaskSpec(id="w", instruction="say  3.")]
    found = find_overlap(a, b, default_task_keys)
    assert found.counts() == {"id": 1, "instruction": 2, "reference": 0, "answer": 0}
    assert [(s.a_ids, s.b_ids) for s in found.shared["instruction"]] == [(("x", "z"), ("w",))]
    assert found.shared_ids() == {"x", "y", "z"}
    assert found.to_json(1)["examples"]["id"] == [{"value": "y", "a": ["y"], "b": ["y"]}]


def test_db_keys_normalise_sql_and_name_the_answers_target() -> None:
    db = get_domain("db")
    (task,) = [t for t in db.bundled_tasks() if t.id == "db-barley-03"]
    same = task.model_copy(update={"id": "other", "instruction": "Lowest yield at Crookston, please.",
                                   "reference_sql": ("select  MIN(bushels_per_acre) -- the minimum\n"
                                                     "from barley_yields where site='Crookston';",)})
    keys, other = db.task_keys(task), db.task_keys(same)
    assert keys.reference == other.reference and keys.answer == other.answer
    assert keys.instruction != other.instruction
    sum_task = task.model_copy(update={"reference_sql": ("SELECT SUM(bushels_per_acre) FROM barley_yields "
                                                         "WHERE site = 'Crookston'",)})
    assert db.task_keys(sum_task).answer != keys.answer  # an equal answer to another question is not shared


@pytest.mark.slow
def test_the_finder_finds_the_five_db_test_tasks_on_the_old_data() -> None:
    db = get_domain("db")
    old_test = [t for t in _old_style(db.bundled_tasks()) if t.split == "test"]
    assert LEAKED <= {t.id for t in old_test}
    raw = import_object(db.generator.generate)(10_000, seed=0, split="train")  # the set
    found = find_overlap(raw, old_test, db.task_keys)
    by_reference = {i for s in found.shared["reference"] for i in s.b_ids}
    by_answer = {i for s in found.shared["answer"] for i in s.b_ids}
    # db-driving-07 is a DELETE: its gold is a table state, which its reference pins; the others share both.
    assert by_reference == LEAKED and by_answer == LEAKED - {"db-driving-07"}
    # Today: those tasks are in their family's split (train), and a generated train set shares nothing.
    assert {t.split for t in db.bundled_tasks() if t.id in LEAKED} == {"train"}
    clean = find_overlap(raw, db.bundled_tasks("test"), db.task_keys)
    assert clean.counts() == {"id": 0, "instruction": 0, "reference": 0, "answer": 0}


@pytest.mark.slow
def test_a_train_set_leaves_out_what_a_bundled_test_split_holds(tmp_path: Path) -> None:
    """With the old bundled suite (no templates), generate_tasks still keeps the five out."""
    db = get_domain("db")
    old = [t for t in _old_style(db.bundled_tasks()) if t.id in LEAKED]
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "old.yaml").write_text(yaml.safe_dump({"tasks": task_items(old)}), encoding="utf-8")
    old_db = dataclasses.replace(db, suite=folder)
    assert {t.id for t in old_db.bundled_tasks("test")} == LEAKED
    train = old_db.generate_tasks(10_000, seed=0, split="train")
    assert len(train) == 10_000
    found = find_overlap(train, old_db.bundled_tasks("test"), db.task_keys)
    assert found.counts() == {"id": 0, "instruction": 0, "reference": 0, "answer": 0}
    raw = import_object(db.generator.generate)(10_000, seed=0, split="train")
    left_out = [t for t in raw if t.id not in {u.id for u in train}]
    assert len(left_out) == 5 and train[:20] == [t for t in raw if t not in left_out][:20]


@pytest.mark.parametrize("name", ["db", "os"])
def test_bundled_instances_of_a_generator_family_carry_it(name: str) -> None:
    domain = get_domain(name)
    families = set(domain.generator_templates())
    marked = [t for t in domain.bundled_tasks() if t.template is not None]
    assert marked and all(t.template in families for t in marked)
    wanted = {"db": {"db-barley-03": "gen-db/min-by-text", "db-wheat-01": "gen-db/count-above",
                     "db-driving-07": "gen-db/delete-below", "db-iowa-03": "gen-db/max-by-text",
                     "db-iowa-04": "gen-db/min-by-text"},
              "os": {"os-text-nth-line": "gen-os/text-nth-line", "os-files-count-logs": "gen-os/files-count-ext"}}
    assert {t.id: t.template for t in marked if t.id in wanted[name]} == wanted[name]


def test_past_the_ceiling_the_error_gives_the_number_available() -> None:
    db = get_domain("db")
    ceiling = import_object(db.generator.ceiling)
    assert (ceiling("train"), ceiling("test"), ceiling(None)) == (10_689, 3_505, 14_194)
    excluded = db.generate_tasks(10, seed=3, split="test")
    with pytest.raises(ConfigError, match=r"makes 3495 distinct task\(s\) in split 'test' outside the test splits "
                                          r"and the excluded sets, 3505 were asked for"):
        db.generate_tasks(3_505, split="test", exclude=excluded)
    rest = db.generate_tasks(3_495, split="test", exclude=excluded)
    assert {t.id for t in rest}.isdisjoint(t.id for t in excluded)
