"""The bundled DB suite: shape, oracle = 1 and wrong answer = 0 on every task and backend,
and the reference answers agree between SQLite and MariaDB."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agentunit_gym.backends.sql.base import SQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.core import FinishReason
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.env import DBEnv
from agentunit_gym.domains.db.scoring import answers_match
from agentunit_gym.domains.db.task import DB_TASK_TYPES, DBTask
from agentunit_gym.errors import TaskFileError
from agentunit_gym.tasks.loader import load_tasks

from .expected_state import agentbench_hash, expected_rows

SUITE: list[DBTask] = [t for t in get_domain("db").bundled_tasks() if isinstance(t, DBTask)]
IDS = [t.id for t in SUITE]


def _open(kind: str) -> SQLBackend:
    if kind == "sqlite":
        return SQLiteBackend()
    from agentunit_gym.backends.sql.factory import open_sql_backend

    return open_sql_backend("mysql")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("mysql", marks=pytest.mark.docker)])
def env(request: pytest.FixtureRequest) -> Iterator[DBEnv]:
    # One backend and one env per module: every task reuses them, as an evaluation run does.
    backend = _open(request.param)
    e = DBEnv(sql_backend=backend)
    yield e
    e.close()
    backend.close()


def test_suite_shape() -> None:
    assert len(SUITE) >= 60
    assert len(set(IDS)) == len(IDS)
    counts = Counter(t.type for t in SUITE)
    assert set(counts) == set(DB_TASK_TYPES), f"missing types: {set(DB_TASK_TYPES) - set(counts)}"
    assert all(n >= 5 for n in counts.values()), counts
    for task in SUITE:
        assert task.category == task.type
        assert task.backends is None  # every bundled task runs on both engines
        assert task.source and task.source.startswith("vega_datasets")
        assert all(10 <= len(t.rows) <= 60 for t in task.tables), task.id
        assert task.description.startswith(f"The table is named {task.tables[0].name};")
        if not task.is_modification:
            assert task.answer and task.reference_sql


@pytest.mark.parametrize("task_id", IDS)
def test_oracle_scores_one(env: DBEnv, task_id: str) -> None:
    task = next(t for t in SUITE if t.id == task_id)
    env.reset(options={"task_id": task_id})
    reward, terminated, info = 0.0, False, {}
    for step in task.reference_solution:
        assert not terminated
        _, reward, terminated, _, info = env.step(env.render_action(step))
        assert not info.get("execution_error"), info
    assert terminated and reward == 1.0, info.get("score")
    assert env.steps == task.k_opt


@pytest.mark.parametrize("task_id", [t.id for t in SUITE if t.is_modification])
def test_oracle_leaves_the_table_computed_from_the_task_data(env: DBEnv, task_id: str) -> None:
    # The expected table is computed in Python from the task file's rows (expected_state.py),
    # not by replaying the reference SQL the oracle sends: a wrong load, a wrong hash or a
    # reference statement that does not do what the task says would all fail here.
    task = next(t for t in SUITE if t.id == task_id)
    names, rows = expected_rows(task)
    assert rows != expected_rows(task.model_copy(update={"reference_sql": ()}))[1]  # the task changes the table
    env.reset(options={"task_id": task_id})
    info: dict[str, object] = {}
    for step in task.reference_solution:
        _, _, _, _, info = env.step(env.render_action(step))
    score = info["score"]
    assert isinstance(score, dict) and score["success"] is True
    assert score["components"]["actual_hash"] == agentbench_hash(rows), (task_id, names)


@pytest.mark.parametrize("task_id", [t.id for t in SUITE if not t.is_modification])
def test_reference_sql_yields_the_gold_answer(env: DBEnv, task_id: str) -> None:
    # The oracle submits the stored gold values; this checks they are what the SQL gives
    # on this engine (for modifications the wrong-answer test shows the SQL changes the table).
    task = next(t for t in SUITE if t.id == task_id)
    db = env.sql_backend.open_episode(task.table_data())
    try:
        result = db.admin_query(task.reference_sql[0])
    finally:
        db.close()
    assert result.ok, result.error
    values = [str(row[0]) for row in result.rows]
    assert answers_match(values, list(task.answer or ())), (values, task.answer)
    assert not answers_match(values + ["extra"], list(task.answer or ()))


@pytest.mark.parametrize("task_id", IDS)
def test_wrong_answer_scores_zero(env: DBEnv, task_id: str) -> None:
    task = next(t for t in SUITE if t.id == task_id)
    env.reset(options={"task_id": task_id})
    if task.is_modification:
        # Committing without making the change must fail: the reference really changes the table.
        _, reward, terminated, _, info = env.step('{"name": "commit", "arguments": {}}')
        assert info["score"]["components"]["hash_match"] is False
    else:
        wrong = ["no such value"] + (["another"] if len(task.answer or ()) > 1 else [])
        _, reward, terminated, _, info = env.step(env.render_action(
            task.reference_solution[-1].model_copy(update={"arguments": {"answer": wrong}})))
        assert info["score"]["components"]["answer_match"] is False
    assert terminated and reward == 0.0


def test_oracle_in_json_form_on_sqlite() -> None:
    with DBEnv(backend="sqlite") as env:
        for task in SUITE:
            env.reset(options={"task_id": task.id})
            for step in task.reference_solution:
                _, reward, terminated, _, info = env.step(env.render_action(step, form="json"))
                assert info["action"]["form"] == "json", (task.id, info.get("action_error"))
            assert (reward, terminated, info["finish_reason"]) == (1.0, True, FinishReason.COMPLETE), task.id


@pytest.mark.docker
def test_reference_answers_agree_on_sqlite_and_mysql() -> None:
    sqlite, mysql = SQLiteBackend(), _open("mysql")
    try:
        for task in SUITE:
            results = {}
            for backend in (sqlite, mysql):
                db = backend.open_episode(task.table_data())
                try:
                    if task.is_modification:
                        for statement in task.reference_sql:
                            assert db.admin_query(statement).ok, (task.id, backend.kind)
                        table = task.graded_table
                        results[backend.kind] = [db.table_hash(table.name, [c.name for c in table.columns])]
                    else:
                        result = db.admin_query(task.reference_sql[0])
                        assert result.ok, (task.id, backend.kind, result.error)
                        results[backend.kind] = [str(r[0]) for r in result.rows]
                finally:
                    db.close()
            if task.is_modification:
                # Same data, same statements: the two engines' hashes agree too.
                assert results["sqlite"] == results["mysql"], task.id
            else:
                assert answers_match(results["mysql"], results["sqlite"]), (task.id, results)
                assert answers_match(results["mysql"], list(task.answer or ())), (task.id, results)
    finally:
        sqlite.close()
        mysql.close()


def _task(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": "t", "type": "counting", "instruction": "How many?", "answer": [3],
        "reference_sql": "SELECT COUNT(*) FROM t",
        "tables": [{"name": "t", "columns": [{"name": "x", "type": "INTEGER"}], "rows": [[1], [2], [None]]}],
    }
    base.update(over)
    return base


def test_db_task_spec_derives_and_validates(tmp_path: Path) -> None:
    task = DBTask.model_validate(_task())
    assert task.category == "counting" and task.family == "SELECT" and task.answer == ("3",)
    assert task.tables[0].rows == (("1",), ("2",), (None,))  # cells are text, NULL stays None
    assert [(s.tool, s.arguments) for s in task.reference_solution] == [
        ("execute_sql", "SELECT COUNT(*) FROM t"), ("submit_answer", {"answer": ["3"]})]
    update = DBTask.model_validate(_task(type=["UPDATE"], answer=None, reference_sql=["UPDATE t SET x = 0"]))
    assert update.family == "UPDATE" and [s.tool for s in update.reference_solution] == ["execute_sql", "commit"]
    bad = [
        (_task(category="ranking"), "category"),
        (_task(answer=None), "answer"),
        (_task(type="UPDATE", answer=None, reference_sql=[]), "reference_sql"),
        (_task(type="JOIN"), "type"),
        (_task(tables=[{"name": "t", "columns": [{"name": "x"}], "rows": [[1, 2]]}]), "row 0"),
        (_task(tables=[{"name": "t", "columns": [{"name": "x"}]}, {"name": "t", "columns": [{"name": "y"}]}]),
         "unique"),
    ]
    for index, (item, needle) in enumerate(bad):
        path = tmp_path / f"bad{index}.yaml"
        path.write_text(yaml.safe_dump({"tasks": [item]}), encoding="utf-8")
        with pytest.raises(TaskFileError, match=needle) as caught:
            load_tasks(path, DBTask)
        assert str(path) in str(caught.value) and "'t'" in str(caught.value)
