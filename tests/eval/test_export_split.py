"""The split survives the way out: a run of bundled tasks, and one of generated and AgentBench
tasks, exported and filtered by the ``split`` column as a trainer would (issue 33, item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.core.generation import write_generated
from agentunit_gym.core.registry import get_domain
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.export import export_run
from agentunit_gym.eval.record.records import iter_records

DBBENCH = Path(__file__).resolve().parents[1] / "fixtures" / "agentbench_dbbench" / "standard.jsonl"


def _exported(run: Path, output: Path) -> list[dict[str, Any]]:
    result = export_run(run, output)
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert result.rows == len(rows) and not result.skipped
    for record, trace in iter_records(run):  # the record and the trace say the same as the row
        assert trace is not None and record.split == trace.split
        (row,) = [r for r in rows if r["extra_info"]["episode"] == record.key]
        assert row["split"] == row["extra_info"]["split"] == record.split
        assert row["backend"] == row["extra_info"]["backend"] == record.backend == trace.backend
    return rows


def _by_split(rows: list[dict[str, Any]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["split"], set()).add(row["task_id"])
    return found


def test_bundled_tasks_export_with_their_split(tmp_path: Path) -> None:
    suite = sorted(get_domain("kg").bundled_tasks(), key=lambda t: t.id)
    wanted = {split: {t.id for t in suite if t.split == split}.__iter__() for split in ("train", "test")}
    chosen = {split: {next(ids), next(ids)} for split, ids in wanted.items()}
    run = tmp_path / "run"
    evaluate(EvalConfig(envs=("KG-v0",), backends=("embedded",), agent="oracle",
                        task_ids=tuple(sorted(chosen["train"] | chosen["test"]))), run)
    rows = _exported(run, tmp_path / "kg.jsonl")
    assert _by_split(rows) == chosen
    assert {r["backend"] for r in rows} == {"embedded"}


def test_generated_and_agentbench_tasks_export_with_their_split(tmp_path: Path) -> None:
    _, train, train_file = write_generated("DB-v0", 3, seed=0, split="train", output=tmp_path / "train.json")
    _, test, test_file = write_generated("DB-v0", 2, seed=0, split="test", output=tmp_path / "test.json")
    # AgentBench's dbbench: dev.jsonl is its dev split, standard.jsonl its test split.
    dbbench = tmp_path / "dbbench"
    dbbench.mkdir()
    items = DBBENCH.read_text(encoding="utf-8").splitlines()
    (dbbench / "dev.jsonl").write_text(items[0] + "\n", encoding="utf-8")
    (dbbench / "standard.jsonl").write_text(items[2] + "\n", encoding="utf-8")
    run = tmp_path / "run"
    evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="oracle",
                        tasks=(str(train_file), str(test_file), str(dbbench))), run)
    rows = _exported(run, tmp_path / "db.jsonl")
    assert _by_split(rows) == {"train": {t.id for t in train}, "dev": {"dev-00000"},
                               "test": {t.id for t in test} | {"standard-00000"}}
    assert all(t.split == "train" for t in train) and all(t.split == "test" for t in test)


def test_parquet_rows_filter_by_split(tmp_path: Path) -> None:
    pc = pytest.importorskip("pyarrow.compute")
    pq = pytest.importorskip("pyarrow.parquet")
    _, train, train_file = write_generated("DB-v0", 2, seed=1, split="train", output=tmp_path / "train.json")
    _, test, test_file = write_generated("DB-v0", 2, seed=1, split="test", output=tmp_path / "test.json")
    run = tmp_path / "run"
    evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="oracle",
                        tasks=(str(train_file), str(test_file))), run)
    export_run(run, tmp_path / "db.parquet")
    table = pq.read_table(tmp_path / "db.parquet")
    for split, tasks in (("train", train), ("test", test)):
        kept = table.filter(pc.equal(table["split"], split))
        assert set(kept["task_id"].to_pylist()) == {t.id for t in tasks}
