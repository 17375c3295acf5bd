"""AgentBench's UPDATE items that compare a TEXT column with a number, end to end.

The items hold a column ``No`` where one row is text (a header row that slipped into the
data, as in AgentBench's tables); the gold statement filters with ``WHERE No = 16``. On
AgentBench's MySQL 8 the statement runs and ``answer_md5`` is the hash of the updated table;
here the oracle replays it through ``eval --tasks`` and must pass on the MariaDB container
(where strict mode used to raise ERROR 1292) and on SQLite. The expected hashes are computed
independently, with hashlib, from the rows the table must hold.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

COLUMNS = ["No", "Driver", "Laps"]
ROWS = [["14", "Ann", "5"], ["16", "Bob", "4"], ["No INT", "Driver TEXT", "Laps INT"], ["17", "Dee", "3"]]


def agentbench_hash(rows: list[list[str]]) -> str:
    row_hashes = sorted(hashlib.md5(",".join(row).encode()).hexdigest()[:5] for row in rows)
    return hashlib.md5(",".join(row_hashes).encode()).hexdigest()


def item(kind: str, statement: str, rows_after: list[list[str]]) -> dict[str, Any]:
    return {"description": "Car 16 did 9 laps.", "type": [kind], "label": [statement],
            "answer_md5": f"[('{agentbench_hash(rows_after)}',)]",
            "add_description": "The name of this table is race, and the headers of this table are "
                               f"{','.join(COLUMNS)}.",
            "table": {"table_name": "race", "table_info": {"columns": [{"name": c, "type": "TEXT"} for c in COLUMNS],
                                                          "rows": ROWS}}}


ITEMS = [
    item("UPDATE", "UPDATE race SET Laps = '9' WHERE No = 16",
         [r if r[0] != "16" else ["16", "Bob", "9"] for r in ROWS]),
    item("DELETE", "DELETE FROM race WHERE No = 17", [r for r in ROWS if r[0] != "17"]),
]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("mysql", marks=pytest.mark.docker)])
def test_the_oracle_passes_text_number_comparisons(tmp_path: Path, backend: str) -> None:
    data = tmp_path / "standard.jsonl"
    data.write_text("\n".join(json.dumps(i) for i in ITEMS) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agentunit_gym", "eval", "--env", "DB-v0", "--agent", "oracle", "--tasks", str(data),
         "--backend", backend, "--output", str(run), "--quiet"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["reward"]) for r in records) == [("standard-00000", 1.0), ("standard-00001", 1.0)]
