"""Generated task sets: every registered domain's generator, its ids, splits and distinctness, and
the oracle replaying a random sample of at least 200 generated tasks per domain to reward 1
(with a wrong commit scoring 0 where the domain's scoring is a plain yes/no)."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401  (registers the envs)
from agentunit_gym.core.registry import domains, get_domain
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import ReferenceStep, TaskSpec
from agentunit_gym.tasks.splits import split_of_family
from tests.tasks.oracle import replay

NAMES = ("db", "kg", "os", "webshop")
BACKENDS = {"os": "local", "db": "sqlite", "kg": "embedded", "webshop": "embedded"}
SAMPLE = 200


def test_every_builtin_domain_declares_a_generator_with_both_splits() -> None:
    declared = {d.name for d in domains() if d.generator is not None}
    assert set(NAMES) <= declared
    for name in NAMES:
        families = get_domain(name).generator_templates()
        assert {split_of_family(f) for f in families} == {"train", "test"}, name


@pytest.mark.parametrize("name", NAMES)
def test_ids_name_content_are_seeded_and_extend(name: str) -> None:
    domain = get_domain(name)
    bundled = {t.id for t in domain.bundled_tasks()}
    tasks = domain.generate_tasks(60, seed=4)
    for task in tasks:
        assert task.template is not None
        family = task.template.rsplit("/", 1)[-1].replace(" ", "-").replace("'", "-")
        assert re.fullmatch(rf"gen-{name}-{re.escape(family)}-[0-9a-f]{{12}}", task.id), task.id
    assert len({t.id for t in tasks}) == 60
    assert bundled.isdisjoint(t.id for t in tasks)
    again = domain.generate_tasks(30, seed=4)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks[:30]]
    other = domain.generate_tasks(30, seed=5)
    assert [t.instruction for t in other] != [t.instruction for t in again]
    for task in tasks:
        assert task.template is not None and task.split == split_of_family(task.template)
        assert task.reference_solution and task.template in domain.generator_templates()


@pytest.mark.parametrize("name", NAMES)
def test_a_split_uses_only_its_families_and_never_a_bundled_test_family(name: str) -> None:
    domain = get_domain(name)
    train = domain.generate_tasks(300, seed=1, split="train")
    assert train[0].id.startswith(f"gen-{name}-")
    assert {t.split for t in train} == {"train"}
    test_families = {domain.task_family(t) for t in domain.bundled_tasks("test")}
    assert test_families.isdisjoint(t.template for t in train)
    test = domain.generate_tasks(50, seed=1, split="test")
    assert {t.split for t in test} == {"test"}
    assert {t.template for t in test}.isdisjoint(t.template for t in train)


def test_generator_contract_errors_say_what_to_do() -> None:
    domain = get_domain("db")
    with pytest.raises(ConfigError, match="at least 1"):
        domain.generate_tasks(0)
    with pytest.raises(ConfigError, match="not dev"):
        domain.generate_tasks(3, split="dev")
    with pytest.raises(ConfigError, match="ask for fewer"):
        domain.generate_tasks(10**6)


@pytest.mark.parametrize("name", ["os", "db", "kg"])
def test_ten_thousand_distinct_tasks(name: str) -> None:
    tasks = get_domain(name).generate_tasks(10_000, seed=0)
    assert len({_content(t) for t in tasks}) == 10_000


@pytest.mark.slow
def test_ten_thousand_distinct_webshop_goals() -> None:
    tasks = get_domain("webshop").generate_tasks(10_000, seed=0)
    assert len({_content(t) for t in tasks}) == 10_000


def _content(task: TaskSpec) -> str:
    """A task's content without its id: two tasks are the same task when this is equal."""
    return task.model_copy(update={"id": "x"}).model_dump_json()


def _wrong_commit(name: str, task: Any) -> ReferenceStep | None:
    """A step that commits at once with something wrong, or None where the domain grades partially
    (KG's F1 and WebShop's reward have their own suites' negative controls)."""
    last = task.reference_solution[-1]
    if name == "os":
        return last if last.tool == "finish" else ReferenceStep(tool="answer", arguments="definitely-not-it")
    if name == "db":
        if task.type in ("INSERT", "UPDATE", "DELETE"):
            return last  # commit without the change: the table hash differs
        return ReferenceStep(tool="submit_answer", arguments={"answer": ["-123456.5"]})
    return None


@pytest.mark.parametrize("name", NAMES)
def test_oracle_replays_a_random_sample_to_reward_one(name: str) -> None:
    domain = get_domain(name)
    pool = domain.generate_tasks(3000, seed=11)
    rng = random.Random(f"oracle-sample:{name}")
    sample = rng.sample(pool, SAMPLE)
    first_of_family: dict[str, TaskSpec] = {}
    for task in pool:
        first_of_family.setdefault(task.template or "", task)
    chosen = sample + [t for t in first_of_family.values() if t not in sample]
    env = gym.make(domain.envs[0].id, backend=BACKENDS[name], tasks=pool[:1]).unwrapped
    started = time.perf_counter()
    try:
        failed = []
        for task in chosen:
            reward, info = replay(env, task)  # type: ignore[arg-type]
            if reward != 1.0:
                failed.append((task.id, task.template, info.get("finish_reason"), info.get("score")))
        assert not failed, failed[:5]
        elapsed = time.perf_counter() - started
        print(f"{name}: {len(chosen)} oracle episodes in {elapsed:.1f} s")
        for task in chosen[:40]:
            wrong = _wrong_commit(name, task)
            if wrong is None:
                break
            env.reset(options={"task": task})
            _, reward, terminated, _, info = env.step(env.render_action(wrong))  # type: ignore[attr-defined]
            assert terminated and reward == 0.0, (task.id, wrong, info.get("score"))
    finally:
        env.close()


def test_kg_make_suite_takes_per_template() -> None:
    from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
    from agentunit_gym.domains.kg.make_suite import make_suite
    from agentunit_gym.domains.kg.store import bundled_store

    with EmbeddedSPARQL(bundled_store()) as store:
        one = make_suite(store, lambda ent: ent, per_template=1)
        assert len(one) == 9 and len({t["template"] for t in one}) == 9
        bundled = {t.instruction: t.template for t in get_domain("kg").bundled_tasks()}
        assert all(bundled[t["question"]] == t["template"] for t in one)  # the suite's first question per template
        with pytest.raises(ConfigError, match="per_template must be at least 1"):
            make_suite(store, lambda ent: ent, per_template=0)


def test_webshop_goals_main_writes_only_where_it_is_told(tmp_path: Path) -> None:
    from agentunit_gym.domains.webshop import goals

    suite = Path(goals.__file__).parent / "suite" / "goals.json"
    before = suite.read_bytes()
    with pytest.raises(SystemExit):
        goals.main([])  # --output is required
    assert goals.main(["--output", str(tmp_path / "g.json"), "--count", "3"]) == 0
    written = json.loads((tmp_path / "g.json").read_text())["tasks"]
    assert [t["id"] for t in written] == ["webshop-0000", "webshop-0001", "webshop-0002"]
    assert suite.read_bytes() == before


@pytest.mark.docker
@pytest.mark.mysql
def test_generated_db_answers_agree_on_sqlite_and_mysql() -> None:
    """The bonus check: a sample of generated DB tasks gives the same answers (and, for
    modifications, the same table hashes) on MySQL-compatible servers as on sqlite."""
    from agentunit_gym.backends.sql.factory import open_sql_backend
    from agentunit_gym.backends.sql.sqlite import SQLiteBackend
    from agentunit_gym.domains.db.scoring import answers_match
    from agentunit_gym.domains.db.task import DBTask

    pool = [t for t in get_domain("db").generate_tasks(3000, seed=11) if isinstance(t, DBTask)]
    sample = random.Random("mysql-sample").sample(pool, SAMPLE)
    sqlite, mysql = SQLiteBackend(), open_sql_backend("mysql")
    try:
        disagree = []
        for task in sample:
            results = {}
            for backend in (sqlite, mysql):
                db = backend.open_episode(task.table_data())
                try:
                    for statement in task.reference_sql[:-1] if not task.is_modification else task.reference_sql:
                        assert db.admin_query(statement).ok, (task.id, backend.kind)
                    if task.is_modification:
                        table = task.graded_table
                        results[backend.kind] = [db.table_hash(table.name, [c.name for c in table.columns])]
                    else:
                        result = db.admin_query(task.reference_sql[-1])
                        assert result.ok, (task.id, backend.kind, result.error)
                        results[backend.kind] = [str(r[0]) for r in result.rows]
                finally:
                    db.close()
            same = (results["sqlite"] == results["mysql"] if task.is_modification
                    else answers_match(results["mysql"], list(task.answer or ())))
            if not same:
                disagree.append((task.id, task.template, task.reference_sql, results))
        assert not disagree, disagree[:5]
    finally:
        sqlite.close()
        mysql.close()
