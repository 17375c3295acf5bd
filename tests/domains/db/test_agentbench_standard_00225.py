"""AgentBench's ``standard-00225``, the one standard item our oracle fails, and its two neighbours.

The items are real (tests/fixtures/agentbench_dbbench, lines 225-227 of AgentBench's
``standard.jsonl``). The neighbours' ``answer_md5`` is the hash of their table after the
reference UPDATE; ``standard-00225``'s is the hash of its table holding every row twice with
the UPDATE applied to both copies, a state AgentBench's own run never reaches (it creates the
table once per sample). So a correct agent fails the item in AgentBench as here, and the env
keeps the item's hash: scores stay comparable. Hashes are computed here with hashlib.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends.sql.base import SQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.domains.db.agentbench import load_agentbench_db
from agentunit_gym.domains.db.env import DBEnv
from agentunit_gym.domains.db.task import DBTask

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "agentbench_dbbench" / "standard.jsonl"
GIVEN_MD5 = "b2b33cba2d11b8d9320695fa1d9828a6"
"""``standard-00225``'s ``answer_md5``."""
REPLAYED_MD5 = "78500c9efefc0c4d1991c3c4123f2feb"
"""The hash of its table after its reference UPDATE, each row once."""


def agentbench_hash(rows: list[list[str]]) -> str:
    row_hashes = sorted(hashlib.md5(",".join(row).encode()).hexdigest()[:5] for row in rows)
    return hashlib.md5(",".join(row_hashes).encode()).hexdigest()


def johnson_scores_16(rows: list[list[str]]) -> list[list[str]]:
    return [row[:6] + ["16"] if row[0] == "Johnson" else row for row in rows]


@pytest.fixture(scope="module")
def tasks() -> list[DBTask]:
    return load_agentbench_db(FIXTURE)


def run_oracle(env: DBEnv, task: DBTask) -> tuple[float, dict[str, Any]]:
    env.reset(options={"task": task})
    reward, info = 0.0, {}
    for step in task.reference_solution:
        _, reward, _, _, info = env.step(env.render_action(step))
    return reward, info


def doubled(task: DBTask) -> DBTask:
    table = task.tables[0]
    return task.model_copy(update={"tables": (table.model_copy(update={"rows": table.rows + table.rows}),)})


def test_the_fixture_holds_the_items_around_standard_00225(tasks: list[DBTask]) -> None:
    assert [t.instruction[:40] for t in tasks] == [
        "Change the length of the Moosehead Grand",
        "Change the value of Points to '16' in th",
        "Anthony Davis's height is updated to 2.1"]
    item = tasks[1]
    assert item.reference_sql == ("UPDATE football_stats SET Points = '16' WHERE Player = 'Johnson'",)
    assert item.answer_md5 == f"[('{GIVEN_MD5}',)]"
    rows = [list(r) for r in item.tables[0].rows]
    assert len(rows) == 20 and [r[0] for r in rows].count("Johnson") == 1
    # Worked out independently of the engines: the statement on the table as given does not
    # reach the item's hash; on the table with every row twice it does.
    assert agentbench_hash(johnson_scores_16(rows)) == REPLAYED_MD5
    assert agentbench_hash(johnson_scores_16(rows + rows)) == GIVEN_MD5


class PretendMySQL(SQLiteBackend):
    """SQLite under the mysql name: the env then trusts answer_md5 instead of replaying."""

    kind = "mysql"


def grade_all(backend: SQLBackend, tasks: list[DBTask]) -> None:
    item = tasks[1]
    with DBEnv(sql_backend=backend, tasks=tasks) as env:
        for neighbour in (tasks[0], tasks[2]):
            reward, info = run_oracle(env, neighbour)
            assert reward == 1.0, (neighbour.id, info.get("score"))
        reward, info = run_oracle(env, item)
        components = info["score"]["components"]
        assert reward == 0.0 and components["hash_match"] is False
        assert (components["expected_hash"], components["actual_hash"]) == (GIVEN_MD5, REPLAYED_MD5)
        # The same statement on the table created with every row twice meets the given hash.
        reward, info = run_oracle(env, doubled(item))
        assert reward == 1.0 and info["score"]["components"]["actual_hash"] == GIVEN_MD5


def test_the_given_hash_is_that_of_a_doubled_table(tasks: list[DBTask]) -> None:
    backend = PretendMySQL()
    try:
        grade_all(backend, tasks)
    finally:
        backend.close()


@pytest.mark.docker
def test_on_mariadb_the_given_hash_is_that_of_a_doubled_table(tasks: list[DBTask], mysql: SQLBackend) -> None:
    grade_all(mysql, tasks)
