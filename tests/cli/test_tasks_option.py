"""``--tasks PATH`` as a user types it: native files, AgentBench's own files and folders, for
``eval`` and ``tasks list|show|validate``; one bad item never stops the others."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.core.registry import domains
from agentunit_gym.eval.record.records import read_records
from tests.cli.clitools import ROOT, cli
from tests.domains.db.test_agentbench import DEV, ROWS, modify_item
from tests.domains.os.test_agentbench import write_checkout

NATIVE = """\
tasks:
- id: shop-orders-01
  type: counting
  instruction: How many orders are [pending]? Answer with the number.
  answer: ['2']
  reference_sql: ["SELECT COUNT(*) FROM orders WHERE status = '[pending]'"]
  tables:
  - name: orders
    columns: [{name: id, type: INT}, {name: status, type: TEXT}]
    rows: [['1', '[pending]'], ['2', 'shipped'], ['3', '[pending]']]
"""


def dbbench_lines() -> list[dict[str, Any]]:
    """dbbench dev.jsonl items: two good, an empty column name, a ragged row, and a modification
    whose reference is MySQL-only SQL (``INSERT ... SET``), which cannot be graded on sqlite."""
    empty_column = json.loads(json.dumps(DEV[0]))
    empty_column["table"]["table_info"]["columns"][1]["name"] = ""
    ragged = json.loads(json.dumps(DEV[0]))
    ragged["table"]["table_info"]["rows"][2] = ["Izmir", "Turkey"]
    mysql_only = modify_item("INSERT", "Add Nice, France, population 342000.",
                             "INSERT INTO cities SET name = 'Nice', country = 'France', population = '342000'",
                             [*ROWS, ["Nice", "France", "342000"]])
    return [DEV[0], empty_column, ragged, DEV[2], mysql_only]


@pytest.fixture
def agentbench(tmp_path: Path) -> Path:
    """An AgentBench checkout's data/: os_interaction (dev.json with a fourth item that is not
    an object, two numbered folders, scripts beside) and dbbench/dev.jsonl."""
    data = write_checkout(tmp_path / "AgentBench")
    dev_json = data / "os_interaction" / "data" / "dev.json"
    dev_json.write_text(json.dumps([*json.loads(dev_json.read_text()), 42]))
    (data / "dbbench").mkdir()
    (data / "dbbench" / "dev.jsonl").write_text("\n".join(json.dumps(i) for i in dbbench_lines()) + "\n")
    return data


def test_validate_lists_every_item_that_does_not_convert(agentbench: Path) -> None:
    dev = agentbench / "dbbench" / "dev.jsonl"
    done = cli("tasks", "validate", str(dev), str(agentbench / "os_interaction" / "data" / "dev.json"), cwd=agentbench)
    assert done.returncode == 1, done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("invalid: ")]
    # Each bad item once, with its file and line (dbbench) or item (OS) and the reason.
    assert any(f"{dev}:2" in p and "dev-00001" in p for p in problems), problems
    assert any(f"{dev}:3" in p and "dev-00002" in p for p in problems), problems
    assert any("dev.json#3" in p and "expected an object" in p for p in problems), problems
    assert len(problems) == 3
    assert f"{dev}: 3 task(s) valid, 2 problem(s) [db, agentbench]" in done.stdout
    assert "3 task(s) valid, 1 problem(s) [os, agentbench]" in done.stdout
    # The whole data/ folder is read by both domains, each its own part.
    both = cli("tasks", "validate", str(agentbench), cwd=agentbench)
    assert "[db, agentbench]" in both.stdout and "[os, agentbench]" in both.stdout


def test_list_and_show_read_agentbench_files_and_native_ones(agentbench: Path, tmp_path: Path) -> None:
    native = tmp_path / "my_tasks.yaml"
    native.write_text(NATIVE)
    dev_json = agentbench / "os_interaction" / "data" / "dev.json"
    listed = cli("tasks", "list", "--tasks", str(dev_json), "--tasks", str(native), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "dev-001-dev-00000" in listed.stdout and "dev-001-dev-00001" in listed.stdout
    assert "std-003" not in listed.stdout  # only the file given, not its neighbours
    # Instructions are data: "[pending]" is shown, not eaten as a style tag.
    assert "How many orders are [pending]? Answer with the number." in listed.stdout
    assert "4 task(s)" in listed.stdout
    assert "1 item(s) of --tasks could not be converted" in listed.stderr
    shown = cli("tasks", "show", "dev-001-dev-00001", "--tasks", str(agentbench), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# domain: os\n") and "gem.txt" in shown.stdout
    missing = cli("tasks", "show", "nope", "--tasks", str(native), cwd=tmp_path)
    assert missing.returncode == 2 and "no task 'nope'" in missing.stderr


def test_eval_runs_agentbench_data_and_native_files_past_bad_items(agentbench: Path, tmp_path: Path) -> None:
    native = tmp_path / "my_tasks.yaml"
    native.write_text(NATIVE)
    out = tmp_path / "run"
    done = cli("eval", "--tasks", str(agentbench / "dbbench" / "dev.jsonl"), "--tasks", str(native),
               "--backend", "sqlite", "--quiet", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # The two items that do not convert are reported once each, and the run goes on.
    assert done.stderr.count("skipped: ") == 2 and "dev.jsonl:2" in done.stderr and "dev.jsonl:3" in done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["envs"] == ["AgentUnit/DB-v0"]  # the domain the files hold tasks of, no --env needed
    assert config["tasks"] == [str(agentbench / "dbbench" / "dev.jsonl"), str(native)]
    records = {r.task_id: r for r in read_records(out / "episodes.jsonl")}
    assert set(records) == {"dev-00000", "dev-00003", "dev-00004", "shop-orders-01"}
    assert records["dev-00000"].success and records["dev-00003"].success and records["shop-orders-01"].success
    # MySQL-only reference SQL on sqlite: that episode's error, not the run's.
    broken = records["dev-00004"]
    assert broken.status == "task_error" and "reference SQL failed on the sqlite backend" in broken.error
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == {"done": 3, "task_error": 1}


def test_cli_and_eval_name_no_domain() -> None:
    """--tasks and every other option reach domains through the registry only: no string
    constant in cli/ or eval/ (docstrings aside) is a domain's name, title or protocol tool
    name, or contains one of its env ids."""
    names = {d.name for d in domains()} | {d.title for d in domains()}
    names |= {a.name for d in domains() for preset in d.protocols.values() for a in preset.tools}
    ids = {e for d in domains() for e in d.env_ids} | {e.split("/", 1)[1] for d in domains() for e in d.env_ids}
    found = []
    for folder in ("cli", "eval"):
        for path in sorted((ROOT / "agentunit_gym" / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                          and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                    words = set(node.value.replace(",", " ").replace("(", " ").split())
                    if node.value in names or words & (names - {d.name for d in domains()}) or any(
                            i in node.value for i in ids):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, found


BROKEN_INIT_OS = """\
tasks:
- id: os-broken-init
  instruction: Say 1.
  init: ["echo broken >&2; exit 3"]
  evaluation: {match: "1"}
  reference_solution: [{answer: "1"}]
- id: os-fine
  instruction: How many lines does /etc/hostname have? Answer with the number.
  evaluation: {match: "1"}
  reference_solution: [{bash: "wc -l < /etc/hostname"}, {answer: "1"}]
"""


def test_an_init_that_fails_is_recorded_and_the_env_copy_goes_on(tmp_path: Path) -> None:
    # The env copy that met the failed init runs the next episodes (one copy: --concurrency 1).
    # gymnasium's passive env checker used to crash the run there with a TypeError.
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(BROKEN_INIT_OS)
    out = tmp_path / "run"
    done = cli("eval", "--env", "OS-v0", "--backend", "local", "--tasks", str(tasks), "--runs", "2",
               "--concurrency", "1", "--agent", "oracle", "--quiet", "--output", str(out), cwd=tmp_path)
    assert "TypeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    records = read_records(out / "episodes.jsonl")
    assert sorted((r.task_id, r.success) for r in records) == [("os-broken-init", False)] * 2 + [("os-fine", True)] * 2
    broken = [r for r in records if r.task_id == "os-broken-init"]
    assert all("init script 1 of 1 failed (exit code 3)" in (r.error or "") for r in broken), broken


def _broken_paths(tmp_path: Path) -> tuple[Path, Path]:
    """A file that is not JSON, and a folder whose every item fails (bad JSON, a task without an instruction)."""
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    folder = tmp_path / "all_bad"
    folder.mkdir()
    (folder / "a.json").write_text("[1, 2")
    (folder / "b.yaml").write_text("tasks:\n- id: no-instruction\n  answer: ['1']\n")
    return broken, folder


def test_eval_stops_with_exit_2_when_no_task_loads_from_a_path(tmp_path: Path) -> None:
    # It used to print "skipped: ...", run all the bundled suites and exit 0.
    broken, folder = _broken_paths(tmp_path)
    native = tmp_path / "my_tasks.yaml"
    native.write_text(NATIVE)
    out = tmp_path / "run"
    for paths in ([broken], [folder], [native, broken]):
        done = cli("eval", *(a for p in paths for a in ("--tasks", str(p))), "--quiet", "--output", str(out),
                   cwd=tmp_path, timeout=120)
        assert done.returncode == 2, (paths, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "episodes run" not in done.stderr and done.stdout == ""
        assert "no task loads from this path, so nothing runs" in done.stderr
        assert not out.exists()  # no run folder: no episode ran
    # Each file is named with its problem.
    done = cli("eval", "--tasks", str(broken), "--tasks", str(folder), "--quiet", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{broken}: not valid JSON" in done.stderr
    assert f"{folder / 'a.json'}: not valid JSON" in done.stderr
    assert f"{folder / 'b.yaml'}, task 'no-instruction', field 'instruction': Field required" in done.stderr
    assert not out.exists()


def test_tasks_for_no_env_of_the_run_stop_it(tmp_path: Path) -> None:
    native = tmp_path / "my_tasks.yaml"
    native.write_text(NATIVE)  # DB tasks
    out = tmp_path / "run"
    done = cli("eval", "--env", "OS-v0", "--tasks", str(native), "--quiet", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{native} holds tasks of the db domain, and no env of this run (AgentUnit/OS-v0) takes them; " \
           "add --env DB-v0" in done.stderr
    assert not out.exists()


def test_tasks_list_and_check_refuse_a_path_with_no_task(tmp_path: Path) -> None:
    broken, _ = _broken_paths(tmp_path)
    for args in (["tasks", "list", "--tasks", str(broken)], ["tasks", "check", str(broken)]):
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert f"{broken}: not valid JSON" in done.stderr and done.stdout == ""


def test_evaluate_raises_no_tasks_error_and_leaves_no_folder(tmp_path: Path) -> None:
    from agentunit_gym.errors import NoTasksError, TaskFileError
    from agentunit_gym.eval.evaluate import evaluate
    from agentunit_gym.eval.plan.config import EvalConfig

    broken, folder = _broken_paths(tmp_path)
    out = tmp_path / "run"
    with pytest.raises(NoTasksError) as info:
        evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), tasks=(str(broken), str(folder))), out)
    assert isinstance(info.value, TaskFileError)
    assert info.value.paths == [str(broken), str(folder)] and len(info.value.problems) == 3
    assert not out.exists()
