"""The AgentBench dbbench loader, on items written in that format, graded on real engines.

Expected table hashes are computed here independently, with hashlib, from the rows the
table must hold: md5 of the sorted, comma-joined first five hex digits of
md5(concat_ws(',', cells)) of every row.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends.sql.base import SQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.domains.db.agentbench import load_agentbench_db
from agentunit_gym.domains.db.env import DBEnv
from agentunit_gym.domains.db.task import DBTask
from agentunit_gym.errors import TaskFileError

WEIRD = "Player's `stats` \"2020\""
COLUMNS = [{"name": "name", "type": "TEXT"}, {"name": "country", "type": "TEXT"},
           {"name": "population", "type": "INT"}]
ROWS = [["Lyon", "France", "522000"], ["Porto", "Portugal", "232000"], ["Izmir", "Turkey", "2948000"],
        ["Graz", "Austria", "291000"]]


def agentbench_hash(rows: list[list[str | None]]) -> str:
    row_hashes = sorted(hashlib.md5(",".join(c for c in row if c is not None).encode()).hexdigest()[:5]
                        for row in rows)
    return hashlib.md5(",".join(row_hashes).encode()).hexdigest()


def table(name: str) -> dict[str, Any]:
    return {"table_name": name, "table_info": {"columns": COLUMNS, "rows": ROWS}}


def select_item(name: str, kind: str, question: str, label: list[str], query: str) -> dict[str, Any]:
    return {"description": question, "type": [kind], "table": table(name), "label": label, "sql": {"query": query},
            "add_description": f"The name of this table is {name}, and the headers of this table are "
                               "name,country,population."}


def modify_item(kind: str, question: str, statement: str, rows_after: list[list[str]]) -> dict[str, Any]:
    return {"description": question, "type": [kind], "table": table("cities"), "label": [statement],
            "answer_md5": f"[('{agentbench_hash(rows_after)}',)]",
            "add_description": "The name of this table is cities, and the headers of this table are "
                               "name,country,population."}


DEV = [
    select_item("cities", "ranking", "Which city has the largest population?", ["Izmir"],
                "SELECT name FROM cities ORDER BY CAST(population AS UNSIGNED) DESC LIMIT 1"),
    select_item(WEIRD, "counting", "How many cities are listed?", ["4"],
                f"SELECT COUNT(*) FROM `{WEIRD.replace('`', '``')}`"),
    modify_item("INSERT", "Add Nice, France, population 342000.",
                "INSERT INTO cities (name, country, population) VALUES ('Nice', 'France', '342000')",
                ROWS + [["Nice", "France", "342000"]]),
]
STANDARD = [
    modify_item("UPDATE", "Porto now has 240000 inhabitants.",
                "UPDATE cities SET population = '240000' WHERE name = 'Porto'",
                [r if r[0] != "Porto" else ["Porto", "Portugal", "240000"] for r in ROWS]),
    modify_item("DELETE", "Remove the Austrian cities.", "DELETE FROM cities WHERE country = 'Austria'",
                [r for r in ROWS if r[1] != "Austria"]),
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data" / "dbbench"
    folder.mkdir(parents=True)
    (folder / "dev.jsonl").write_text("\n".join(json.dumps(i) for i in DEV) + "\n\n", encoding="utf-8")
    (folder / "standard.jsonl").write_text("\n".join(json.dumps(i) for i in STANDARD) + "\n", encoding="utf-8")
    return tmp_path / "data"


def test_ids_fields_and_agentbench_table_creation(data_dir: Path) -> None:
    tasks = load_agentbench_db(data_dir)
    assert [t.id for t in tasks] == ["dev-00000", "dev-00001", "dev-00002", "standard-00000", "standard-00001"]
    assert [t.type for t in tasks] == ["ranking", "counting", "INSERT", "UPDATE", "DELETE"]
    ranking, counting, insert = tasks[:3]
    assert ranking.answer == ("Izmir",) and ranking.reference_sql == (DEV[0]["sql"]["query"],)
    assert ranking.instruction == "Which city has the largest population?"
    assert ranking.description.startswith("The name of this table is cities")
    assert [c.type for c in ranking.tables[0].columns] == ["TEXT", "TEXT", "TEXT"]  # INT declared, TEXT created
    assert counting.tables[0].name == WEIRD and counting.database == WEIRD
    assert insert.answer is None and insert.reference_sql == (DEV[2]["label"][0],)
    assert insert.answer_md5 == DEV[2]["answer_md5"]
    assert insert.source is not None and insert.source.endswith("dev.jsonl:3")
    assert [s.tool for s in insert.reference_solution] == ["execute_sql", "commit"]
    # The dbbench folder and a single file load the same items.
    assert [t.id for t in load_agentbench_db(data_dir / "dbbench")] == [t.id for t in tasks]
    assert [t.id for t in load_agentbench_db(data_dir / "dbbench" / "standard.jsonl")] == [
        "standard-00000", "standard-00001"]


def test_loader_errors_name_the_place(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="no such file"):
        load_agentbench_db(tmp_path / "missing")
    with pytest.raises(TaskFileError, match="dev.jsonl"):
        load_agentbench_db(tmp_path)  # a folder without dbbench files
    bad = tmp_path / "dev.jsonl"
    bad.write_text(json.dumps(DEV[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"dev\.jsonl:2.*dev-00001"):
        load_agentbench_db(bad)
    wrong_type = {**DEV[0], "type": ["JOIN"]}
    bad.write_text(json.dumps(wrong_type) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match="type"):
        load_agentbench_db(bad)
    no_table = {k: v for k, v in DEV[0].items() if k != "table"}
    bad.write_text(json.dumps(no_table) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match="table"):
        load_agentbench_db(bad)


def run_oracle(env: DBEnv, task: DBTask) -> tuple[float, dict[str, Any]]:
    env.reset(options={"task": task})
    reward, info = 0.0, {}
    for step in task.reference_solution:
        _, reward, _, _, info = env.step(env.render_action(step))
    return reward, info


def test_sqlite_grading_and_hashes_match_hashlib(data_dir: Path) -> None:
    tasks = load_agentbench_db(data_dir)
    with DBEnv(backend="sqlite", tasks=tasks) as env:
        for task in tasks:
            reward, info = run_oracle(env, task)
            assert reward == 1.0, (task.id, info.get("score"))
            if task.is_modification:
                comp = info["score"]["components"]
                # On SQLite the expectation comes from replaying the statement; it must equal
                # the hash we computed with hashlib, which is also the item's answer_md5.
                assert comp["actual_hash"] == comp["expected_hash"] == task.answer_md5[3:35]  # type: ignore[index]
        env.reset(options={"task_id": "dev-00001"})
        obs, *_ = env.step(f"Action: Operation\n```sql\nSELECT name FROM \"{WEIRD.replace(chr(34), chr(34) * 2)}\" "
                           "WHERE country = 'Turkey'\n```")
        assert obs == "[('Izmir',)]"
        _, reward, *_ = env.step("Action: Answer\nFinal Answer: [\"5\"]")
        assert reward == 0.0


class PretendMySQL(SQLiteBackend):
    """SQLite under the mysql name: the env then trusts answer_md5 instead of replaying."""

    kind = "mysql"


def test_answer_md5_is_used_on_mysql_backends(data_dir: Path) -> None:
    tasks = [t for t in load_agentbench_db(data_dir) if t.is_modification]
    backend = PretendMySQL()
    try:
        with DBEnv(sql_backend=backend, tasks=tasks) as env:
            for task in tasks:
                assert run_oracle(env, task)[0] == 1.0, task.id
                tampered = task.model_copy(update={"answer_md5": "[('" + "0" * 32 + "',)]"})
                reward, info = run_oracle(env, tampered)
                assert reward == 0.0 and info["score"]["components"]["expected_hash"] == "0" * 32
    finally:
        backend.close()


@pytest.mark.docker
def test_mysql_grading_with_answer_md5(data_dir: Path, mysql: SQLBackend) -> None:
    tasks = load_agentbench_db(data_dir)
    with DBEnv(sql_backend=mysql, tasks=tasks) as env:
        for task in tasks:
            reward, info = run_oracle(env, task)
            assert reward == 1.0, (task.id, info.get("score"))
            if task.is_modification:
                assert info["score"]["components"]["actual_hash"] == task.answer_md5[3:35]  # type: ignore[index]
        env.reset(options={"task_id": "dev-00001"})  # the database and table named with quotes and a backtick
        obs, *_ = env.step(f"Action: Operation\n```sql\nSELECT COUNT(*) FROM `{WEIRD.replace('`', '``')}`\n```")
        assert obs == "[(4,)]"
        env.reset(options={"task_id": "standard-00001"})
        env.step("Action: Operation\n```sql\nDELETE FROM cities WHERE country = 'Turkey'\n```")
        _, reward, _, _, info = env.step("Action: Answer\nFinal Answer: []")
        assert reward == 0.0 and info["score"]["components"]["hash_match"] is False


def test_env_and_eval_read_an_agentbench_folder_keeping_the_good_items(
        data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # One bad line among good ones: the env keeps the good items (with AgentBench's ids, which
    # count lines, so the ids after the bad one do not shift) and warns about the bad one.
    dev = data_dir / "dbbench" / "dev.jsonl"
    dev.write_text(dev.read_text(encoding="utf-8").replace("\n", "\n{not json\n", 1), encoding="utf-8")
    with caplog.at_level("WARNING", logger="agentunit_gym"):
        env = DBEnv(backend="sqlite", tasks=data_dir)
    try:
        ids = [t.id for t in env.tasks]
    finally:
        env.close()
    assert ids == ["dev-00000", "dev-00002", "dev-00003", "standard-00000", "standard-00001"]
    assert "1 item(s)" in caplog.text and "dev.jsonl:2" in caplog.text

    from agentunit_gym.cli.main import main

    out = tmp_path / "run"
    assert main(["eval", "--env", "DB-v0", "--backend", "sqlite", "--tasks", str(data_dir), "--agent", "oracle",
                 "--output", str(out), "--quiet"]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(ids)
    assert all(r["success"] for r in records)
