"""One AgentBench item that cannot be converted does not stop the others.

Files in the shapes of AgentBench's own: dbbench's ``dev.jsonl`` holds one item whose table
has a column with an empty name, the ``standard.jsonl`` of its v0.2 tag one ragged row (fewer
cells than columns), and OS files can hold an item without the example its check needs.
Every item that converts loads, with the ids it would have had anyway; each of the others
is reported once with its file, its line (or index) and the reason; ``tasks validate``
lists them and exits 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.agentbench import collect_agentbench_db
from agentunit_gym.domains.os.agentbench import collect_agentbench_os


def db_item(n: int, *, columns: list[str] | None = None, rows: list[list[str]] | None = None) -> dict[str, Any]:
    names = columns if columns is not None else ["Name", "Score"]
    return {"description": f"What is the score of player {n}?",
            "add_description": f"The name of this table is scores{n}, and the headers of this table are "
                               f"{','.join(names)}.",
            "type": ["other"], "label": [str(n)],
            "table": {"table_name": f"scores{n}",
                      "table_info": {"columns": [{"name": c, "type": "TEXT"} for c in names],
                                     "rows": rows if rows is not None else [[f"p{n}", str(n)], ["q", "0"]]}},
            "sql": {"query": f"SELECT Score FROM scores{n} WHERE Name = 'p{n}'"}}


def write_dbbench(root: Path) -> Path:
    folder = root / "data" / "dbbench"
    folder.mkdir(parents=True)
    dev = [db_item(0), db_item(1), db_item(2, columns=["Name", ""]), db_item(3)]
    # A blank line between items does not count as a line index.
    (folder / "dev.jsonl").write_text("\n".join(json.dumps(x) for x in dev[:2]) + "\n\n"
                                      + "\n".join(json.dumps(x) for x in dev[2:]) + "\n")
    standard = [db_item(10), db_item(11, rows=[["a", "1"], ["ragged"]]), db_item(12)]
    (folder / "standard.jsonl").write_text("\n".join(json.dumps(x) for x in standard) + "\n{not json\n")
    return root / "data"


def test_dbbench_loads_every_item_that_converts_and_reports_the_rest(tmp_path: Path) -> None:
    data = write_dbbench(tmp_path)
    result = collect_agentbench_db(data)
    assert [t.id for t in result.tasks] == ["dev-00000", "dev-00001", "dev-00003",
                                            "standard-00000", "standard-00002"]
    dev, standard = data / "dbbench" / "dev.jsonl", data / "dbbench" / "standard.jsonl"
    problems = [(p.source, p.task_id, p.field) for p in result.problems]
    assert problems == [(f"{dev}:4", "dev-00002", "tables.0.columns.1.name"),
                        (f"{standard}:2", "standard-00001", "tables.0"),
                        (f"{standard}:4", "standard-00003", None)]
    empty, ragged, broken = result.problems
    assert "at least 1 character" in empty.message
    assert "row 1 of table 'scores11' has 1 cells, expected 2" in ragged.message
    assert "not valid JSON" in broken.message
    # The registry's loader for the folder is the same collector.
    through_domain = get_domain("db").load_tasks(data)
    assert [t.id for t in through_domain.tasks] == [t.id for t in result.tasks]
    assert through_domain.problems == result.problems


def write_os(root: Path) -> Path:
    base = root / "data" / "os_interaction"
    (base / "data" / "2").mkdir(parents=True)
    items: list[Any] = [
        {"description": "Say 1.", "evaluation": {"match": "1"}},
        {"description": "A check with a null entry but no example.", "evaluation": {"check": [None]}},
        "not an object",
        {"description": "Say 4.", "evaluation": {"match": "4"}},
        {"description": "The example's file is missing from the checkout.",
         "evaluation": {"check": [None, {"language": "python", "file": "check/integer-match.py"}],
                        "example": {"file": "example/missing.sh"}}},
    ]
    (base / "data" / "dev.json").write_text(json.dumps(items))
    (base / "data" / "2" / "broken.json").write_text("[{")
    (base / "data" / "2" / "fine.json").write_text(json.dumps({"description": "Say 5.", "evaluation": {"match": "5"}}))
    return root / "data"


def test_os_loads_every_item_that_converts_and_reports_the_rest(tmp_path: Path) -> None:
    data = write_os(tmp_path)
    result = collect_agentbench_os(data)
    assert [t.id for t in result.tasks] == ["dev-001-dev-00000", "dev-001-dev-00003", "std-002-fine-00000"]
    dev = data / "os_interaction" / "data" / "dev.json"
    broken = data / "os_interaction" / "data" / "2" / "broken.json"
    assert [(p.source, p.task_id) for p in result.problems] == [
        (f"{dev}#1", "dev-001-dev-00001"), (f"{dev}#2", "dev-001-dev-00002"), (f"{dev}#4", "dev-001-dev-00004"),
        (str(broken), None)]
    assert "no example script" in result.problems[0].message
    assert "expected an object" in result.problems[1].message
    assert "missing.sh" in result.problems[2].message and "cannot read the script" in result.problems[2].message
    assert "JSON" in result.problems[3].message


def test_tasks_validate_lists_each_problem_once_and_exits_1(tmp_path: Path) -> None:
    data = write_dbbench(tmp_path)
    done = subprocess.run([sys.executable, "-m", "agentunit_gym", "tasks", "validate", str(data), "--domain", "db"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    invalid = [line for line in done.stderr.splitlines() if line.startswith("invalid: ")]
    dev = data / "dbbench" / "dev.jsonl"
    assert len(invalid) == 3
    assert invalid[0].startswith(f"invalid: {dev}:4, task 'dev-00002', field 'tables.0.columns.1.name': ")
    assert f"{data}: 5 task(s) valid, 3 problem(s)" in done.stdout
