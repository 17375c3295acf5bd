"""``agentunit-gym tasks overlap`` and ``tasks generate --exclude``, through the CLI's ``main``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.cli.main import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    """``agentunit-gym ARGS`` in this process (so the checkout under test is the one run)."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run


def test_overlap_exits_0_when_nothing_is_shared_and_1_with_examples_when_something_is(tmp_path: Path, cli: Any) -> None:
    out = tmp_path / "db-train.json"
    assert cli("tasks", "generate", "--env", "DB-v0", "-n", "40", "--split", "train", "--output", str(out),
               cwd=tmp_path).returncode == 0
    clean = cli("tasks", "overlap", str(out), "bundled:DB-v0:test", "--json", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    assert (report["a_tasks"], report["b_tasks"], report["domain"]) == (40, 23, "db")
    assert report["shared"] == {"id": 0, "instruction": 0, "reference": 0, "answer": 0}
    items = json.loads(out.read_text())["tasks"]
    copy = {**items[3], "id": "my-copy", "instruction": "Reworded: " + items[3]["instruction"]}
    other = tmp_path / "mine.yaml"
    other.write_text(json.dumps({"tasks": [copy]}), encoding="utf-8")
    shared = cli("tasks", "overlap", str(out), str(other), cwd=tmp_path)
    assert shared.returncode == 1, shared.stderr
    assert "id: 0 task(s)" in shared.stdout and "reference: 1 task(s)" in shared.stdout
    assert f"A {items[3]['id']}; B my-copy" in shared.stdout and "shared: yes" in shared.stdout


def test_overlap_names_the_file_and_line_of_a_malformed_file(tmp_path: Path, cli: Any) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"tasks": [\n {"id": "x",\n  oops}\n]}\n', encoding="utf-8")
    done = cli("tasks", "overlap", str(bad), "bundled:DB-v0:test", cwd=tmp_path)
    assert done.returncode == 2
    assert str(bad) in done.stderr and "line 3" in done.stderr
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("tasks:\n  - id: x\n    instruction: [unclosed\n", encoding="utf-8")
    done = cli("tasks", "overlap", "bundled:DB-v0:test", str(bad_yaml), cwd=tmp_path)
    assert done.returncode == 2 and str(bad_yaml) in done.stderr and "line" in done.stderr
    spec = cli("tasks", "overlap", "generated:DB-v0:train", "bundled:DB-v0", cwd=tmp_path)
    assert spec.returncode == 2 and "generated:ENV:SPLIT:COUNT[:SEED]" in spec.stderr
    mixed = cli("tasks", "overlap", "bundled:DB-v0:test", "bundled:OS-v0:test", cwd=tmp_path)
    assert mixed.returncode == 2 and "one domain" in mixed.stderr


def test_generate_exclude_draws_tasks_not_in_the_given_sets(tmp_path: Path, cli: Any) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert cli("tasks", "generate", "--env", "KG-v0", "-n", "50", "--seed", "0", "--split", "train",
               "--output", str(first), cwd=tmp_path).returncode == 0
    done = cli("tasks", "generate", "--env", "KG-v0", "-n", "50", "--seed", "0", "--split", "train",
               "--output", str(second), "--exclude", str(first), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    a = {t["id"] for t in json.loads(first.read_text())["tasks"]}
    b = {t["id"] for t in json.loads(second.read_text())["tasks"]}
    assert len(b) == 50 and a.isdisjoint(b)
    overlap = cli("tasks", "overlap", str(first), str(second), "--json", cwd=tmp_path)
    assert json.loads(overlap.stdout)["shared"]["id"] == 0
    assert json.loads(overlap.stdout)["shared"]["reference"] == 0
