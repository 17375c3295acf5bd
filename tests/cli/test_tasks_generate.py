"""``agentunit-gym tasks generate``, ``tasks list --env --split --json`` and ``eval --split``, run as a user would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from agentunit_gym.core.generation import PACKAGE_DIR
from tests.cli.clitools import cli


def test_generate_writes_a_file_that_validate_check_and_eval_read(tmp_path: Path) -> None:
    out = tmp_path / "sets" / "db-train.json"
    done = cli("tasks", "generate", "--env", "DB-v0", "-n", "20", "--seed", "2", "--split", "train",
               "--output", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    items = json.loads(out.read_text())["tasks"]
    expected = f"wrote 20 db task(s) to {out} (train: 20); ids {items[0]['id']} ... {items[-1]['id']}"
    assert expected in done.stdout
    assert all(re.fullmatch(r"gen-db-[a-z0-9-]+-[0-9a-f]{12}", i["id"]) for i in items)
    assert {i["split"] for i in items} == {"train"} and all(i["template"].startswith("gen-db/") for i in items)
    valid = cli("tasks", "validate", str(out), cwd=tmp_path)
    assert valid.returncode == 0 and f"ok: {out} (20 task(s)) [db, native]" in valid.stdout, valid.stdout + valid.stderr
    check = cli("tasks", "check", str(out), "--backend", "sqlite", "--json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    (row,) = json.loads(check.stdout)["files"]
    assert (row["loaded"], row["ran"], row["passed"]) == (20, 20, 20)


def test_generate_yaml_for_os_and_the_users_families_need_users(tmp_path: Path) -> None:
    out = tmp_path / "os.yaml"
    done = cli("tasks", "generate", "--env", "AgentUnit/OS-v0", "-n", "300", "--seed", "9", "--output", str(out),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tasks = yaml.safe_load(out.read_text())["tasks"]
    users = [t for t in tasks if t["template"].startswith("gen-os/users-")]
    assert users and all(t["needs_users"] is True and t["users_note"] for t in users)
    assert not any(t.get("needs_users") for t in tasks if not t["template"].startswith("gen-os/users-"))
    assert cli("tasks", "validate", str(out), cwd=tmp_path).returncode == 0


def test_generate_never_writes_into_the_package_and_names_bad_envs(tmp_path: Path) -> None:
    inside = PACKAGE_DIR / "generated.json"
    done = cli("tasks", "generate", "--env", "KG-v0", "-n", "3", "--output", str(inside), cwd=tmp_path)
    assert done.returncode == 2 and "inside the agentunit_gym package" in done.stderr and not inside.exists()
    done = cli("tasks", "generate", "--env", "Nope-v0", "-n", "3", "--output", str(tmp_path / "x.json"), cwd=tmp_path)
    assert done.returncode == 2 and "unknown env 'Nope-v0'" in done.stderr


def test_list_json_by_env_and_split(tmp_path: Path) -> None:
    done = cli("tasks", "list", "--env", "KG-v0", "--split", "test", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)
    assert len(items) == 21 and {i["split"] for i in items} == {"test"} and {i["domain"] for i in items} == {"kg"}
    assert all(i["id"].startswith("kg-") and i["template"].startswith("kg/") for i in items)


def test_eval_split_runs_only_that_split(tmp_path: Path) -> None:
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "--split", "test", "--output", "run", "--quiet",
               cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    ids = {x["task_id"] for x in lines}
    assert len(ids) == 23 and all(x["success"] for x in lines)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["env_options"]["split"] == "test"
