"""``agentunit-gym tasks check``: per source file, what loads, runs and passes with the oracle."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.domains.os.users import ONE_UID
from tests.backends.test_local_users import skip_unless_many_users
from tests.cli.clitools import cli
from tests.domains.db.test_agentbench import DEV

OS_ITEMS: list[dict[str, Any]] = [
    # passes: a check item whose example (the oracle's reference) prints the answer.
    {"description": "How many lines of /root/app.log contain ERROR?",
     "create": {"local": "default", "init": {"code": "printf 'ok\\nERROR a\\nERROR b\\n' > /root/app.log"}},
     "evaluation": {"check": [None, {"language": "python",
                                     "code": "import sys\nsys.exit(sys.argv[1].strip() != sys.argv[2].strip())"}],
                    "example": {"code": "grep -c ERROR /root/app.log"}}},
    # passes: a match item.
    {"description": "Say ok.", "evaluation": {"match": "ok"}},
    # does not convert: no description.
    {"evaluation": {"match": "x"}},
    # cannot pass on the local backend: its init script needs the network, which sandboxes lack.
    {"description": "Fetch a page.",
     "create": {"init": {"code": "python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), 3)\""}},
     "evaluation": {"match": "page"}},
]


def _write(tmp_path: Path) -> tuple[Path, Path]:
    os_file = tmp_path / "data" / "os_interaction" / "data" / "dev.json"
    os_file.parent.mkdir(parents=True)
    os_file.write_text(json.dumps(OS_ITEMS), encoding="utf-8")
    db_file = tmp_path / "data" / "dbbench" / "dev.jsonl"
    db_file.parent.mkdir(parents=True)
    lines = [json.dumps(DEV[0]), "{not json", json.dumps(DEV[2])]
    db_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return os_file, db_file


def test_counts_and_reasons_per_file_as_json_and_table(tmp_path: Path) -> None:
    os_file, db_file = _write(tmp_path)
    run = tmp_path / "run"
    done = cli("tasks", "check", str(tmp_path / "data"), "--backend", "local", "--backend", "sqlite", "--json",
               "--output", str(run), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["run_dir"] == str(run)
    files = {f["file"]: f for f in report["files"]}
    assert set(files) == {str(os_file), str(db_file)}
    os_row, db_row = files[str(os_file)], files[str(db_file)]
    assert (os_row["domain"], os_row["format"]) == ("os", "agentbench")
    assert [os_row[k] for k in ("loaded", "not_converted", "ran", "passed", "failed", "not_run")] == [3, 1, 3, 2, 1, 0]
    [problem] = os_row["problems"]
    assert problem["where"].startswith(f"{os_file}#2") and problem["reason"].startswith("instruction:")
    [failure] = os_row["failures"]
    assert failure["reason"].startswith("infra_error: BackendError:")
    assert "init script 1 of 1 failed" in failure["reason"]
    assert "Network is unreachable" in failure["detail"]
    assert db_row["domain"] == "db"
    assert [db_row[k] for k in ("loaded", "not_converted", "ran", "passed", "failed", "not_run")] == [2, 1, 2, 2, 0, 0]
    [bad_line] = db_row["problems"]
    assert bad_line["where"].startswith(f"{db_file}:2")
    # The oracle run is kept where --output said: one episode per loaded item.
    assert len((run / "episodes.jsonl").read_text(encoding="utf-8").splitlines()) == 5

    table = cli("tasks", "check", str(tmp_path / "data"), "--backend", "local", "--backend", "sqlite",
                cwd=tmp_path)
    assert table.returncode == 1, table.stderr
    row = next(line for line in table.stdout.splitlines() if "│ db " in line)
    assert [c.strip() for c in row.split("│")[2:9]] == ["db", "2", "1", "2", "2", "0", "0"]
    # The reasons column folds at its width, wherever the tmp path's length puts the break: read
    # its cells back as one text, whitespace aside.
    reasons = "".join(line.split("│")[-2] for line in table.stdout.splitlines() if line.count("│") > 2)
    assert "initscript1of1failed" in re.sub(r"\s", "", reasons) and "not ok" in table.stdout


def test_exit_0_when_every_item_passes_and_2_on_user_mistakes(tmp_path: Path) -> None:
    db_file = tmp_path / "dev.jsonl"
    db_file.write_text("\n".join(json.dumps(i) for i in DEV) + "\n", encoding="utf-8")
    done = cli("tasks", "check", str(db_file), "--backend", "sqlite", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(done.stdout)["files"]
    assert (row["loaded"], row["ran"], row["passed"], row["ok"]) == (3, 3, 3, True)
    assert not list(tmp_path.glob("results*"))  # without --output the run leaves nothing behind

    missing = cli("tasks", "check", str(tmp_path / "nowhere.jsonl"), cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere.jsonl" in missing.stderr
    assert cli("tasks", "check", cwd=tmp_path).returncode == 2
    wrong = cli("tasks", "check", str(db_file), "--backend", "nope", cwd=tmp_path)
    assert wrong.returncode == 2 and "nope" in wrong.stderr


NATIVE = """- id: tc-say-hi
  instruction: Say hi.
  evaluation: {match: hi}
  reference_solution: [{tool: answer, arguments: {answer: hi}}]
- id: tc-docker-only
  instruction: Say yo.
  evaluation: {match: yo}
  backends: [docker]
  backend_note: needs the full image
  reference_solution: [{tool: answer, arguments: {answer: yo}}]
"""


def test_a_native_file_lists_the_items_its_backend_leaves_out(tmp_path: Path) -> None:
    native = tmp_path / "mine.yaml"
    native.write_text(NATIVE, encoding="utf-8")
    done = cli("tasks", "check", str(native), "--backend", "local", "--json", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [row] = json.loads(done.stdout)["files"]
    assert (row["file"], row["format"]) == (str(native), "native")
    assert [row[k] for k in ("loaded", "not_converted", "ran", "passed", "failed", "not_run")] == [2, 0, 1, 1, 0, 1]
    assert row["not_run_items"] == [{"where": "tc-docker-only", "reason": "not run on local: needs the full image",
                                     "detail": ""}]


def test_a_run_the_evaluator_stops_early_counts_the_rest_as_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The evaluator stops a run whose episodes mostly fail for one infrastructure reason; the
    # stop is simulated (one episode runs, then the stop), the episode that ran is real.
    from agentunit_gym.errors import RunStoppedError
    from agentunit_gym.eval import taskcheck
    from agentunit_gym.eval.run.runner import EvalConfig

    real = taskcheck.evaluate

    def stops_after_one(config: EvalConfig, output: Path, progress: Any = None) -> None:
        real(config.model_copy(update={"task_ids": ("dev-00000",)}), output, progress=progress)
        raise RunStoppedError("stopped early: 5 of the 5 episodes finished so far failed for the same reason: X.")

    monkeypatch.setattr(taskcheck, "evaluate", stops_after_one)
    db_file = tmp_path / "dev.jsonl"
    db_file.write_text("\n".join(json.dumps(i) for i in DEV) + "\n", encoding="utf-8")
    result = taskcheck.check_tasks([db_file], backends=["sqlite"], output=tmp_path / "run")
    assert result.stopped is not None and "same reason: X" in result.stopped and not result.ok
    [row] = result.files
    assert (row.loaded, row.ran, row.passed, len(row.not_run)) == (3, 1, 1, 2)
    assert {f.where for f in row.not_run} == {"dev-00001", "dev-00002"}
    assert row.top_reasons() == [("not run: the oracle run stopped early", 2)]


USERS = """- id: tc-plain
  instruction: Say hi.
  evaluation: {match: hi}
  reference_solution: [{tool: answer, arguments: {answer: hi}}]
- id: tc-as-jack
  instruction: Who owns /tmp/f?
  init: ["useradd -M jack && touch /tmp/f && chown jack /tmp/f"]
  evaluation: {match: jack}
  needs_users: true
  users_note: gives a file to jack
  reference_solution:
    - {tool: bash, arguments: {script: "stat -c %U /tmp/f"}}
    - {tool: answer, arguments: {answer: jack}}
"""


@pytest.mark.parametrize("many", [True, False])
def test_items_that_switch_users_run_where_the_sandbox_maps_many(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, many: bool) -> None:
    from agentunit_gym.backends.sandbox import usermap
    from agentunit_gym.eval.taskcheck import check_tasks

    if many:
        skip_unless_many_users()  # a failure under AGENTUNIT_REQUIRE_CGROUP=1
    if not many:  # what a non-root caller's sandbox decides
        monkeypatch.setattr(usermap, "user_switching", lambda isolation="auto": usermap.Support(False, "one uid"))
    native = tmp_path / "users.yaml"
    native.write_text(USERS, encoding="utf-8")
    [row] = check_tasks([native], backends=("local",)).files
    if many:
        assert (row.ran, row.passed, row.not_run) == (2, 2, [])
    else:
        assert (row.ran, row.passed) == (1, 1)
        assert [(f.where, f.reason) for f in row.not_run] == [
            ("tc-as-jack", f"not run on local: gives a file to jack; {ONE_UID}")]


def _webshop_folder(folder: Path) -> Path:
    from tests.domains.webshop.test_loader import ATTRIBUTES, HUMAN, PRODUCTS, REVIEWS

    folder.mkdir(parents=True)
    for name, data in (("items_shuffle_1000.json", PRODUCTS), ("items_ins_v2_1000.json", ATTRIBUTES),
                       ("items_human_ins.json", HUMAN), ("reviews.json", REVIEWS)):
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_kg_and_webshop_files_are_reported_per_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from agentunit_gym.cli.main import main
    from agentunit_gym.core.registry import get_domain
    from tests.domains.kg.test_kg_agentbench import ITEMS

    monkeypatch.delenv("AGENTUNIT_KG_ENDPOINT", raising=False)
    shop = _webshop_folder(tmp_path / "WebShop" / "data")
    freebase = tmp_path / "AgentBench" / "data" / "knowledgegraph" / "std.json"
    freebase.parent.mkdir(parents=True)
    freebase.write_text(json.dumps(ITEMS), encoding="utf-8")
    bundled = tmp_path / "kg.yaml"
    bundled.write_text((get_domain("kg").suite / "bundled.yaml").read_text(encoding="utf-8"), encoding="utf-8")

    # WebShop's human goals run over WebShop's catalog (not the generated one) and make one row;
    # the KG file of the bundled graph runs; AgentBench's Freebase items, without an endpoint,
    # are listed as not run with the fix, and do not stop the check of the other files.
    code = main(["tasks", "check", str(shop), str(bundled), str(freebase.parent.parent), "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    rows = {Path(f["file"]).name: f for f in report["files"]}
    assert set(rows) == {"items_human_ins.json", "kg.yaml", "std.json"}
    counts = ("loaded", "not_converted", "ran", "passed", "failed", "not_run")
    assert [rows["items_human_ins.json"][k] for k in counts] == [2, 0, 2, 2, 0, 0]
    assert rows["items_human_ins.json"]["domain"] == "webshop" and rows["items_human_ins.json"]["format"] == "webshop"
    assert [rows["kg.yaml"][k] for k in counts] == [63, 0, 63, 63, 0, 0]
    assert [rows["std.json"][k] for k in counts] == [3, 0, 0, 0, 0, 3]
    assert {i["reason"] for i in rows["std.json"]["not_run_items"]} == {
        "not run on auto: about Freebase: runs only in a KG env given a Freebase SPARQL endpoint "
        "(--env-option KG-v0:endpoint=http://HOST:PORT/sparql), apart from tasks of the bundled graph"}

    # The Freebase file alone: the KG env cannot start without the endpoint; the check says why.
    code = main(["tasks", "check", str(freebase), "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    [row] = report["files"]
    assert [row[k] for k in counts] == [3, 0, 0, 0, 0, 3]
    assert row["top_reasons"] == [{"reason": "not run: these KG tasks are about Freebase (AgentBench's "
                                   "knowledge-graph items), and no Freebase SPARQL endpoint was given", "count": 3}]
    assert "--env-option KG-v0:endpoint=" in report["needs_server"]["AgentUnit/KG-v0"]
    assert main(["tasks", "check", str(freebase)]) == 1
    assert "AgentUnit/KG-v0 ran nothing: these KG tasks are about Freebase" in capsys.readouterr().out
    # --env-option reaches the env: the error is about that server now (nothing listens there).
    code = main(["tasks", "check", str(freebase), "--env-option", "KG-v0:endpoint=http://127.0.0.1:9/sparql"])
    assert code == 1
    assert "cannot reach the SPARQL endpoint http://127.0.0.1:9/sparql" in " ".join(capsys.readouterr().out.split())
