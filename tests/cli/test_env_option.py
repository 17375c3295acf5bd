"""``eval --env-option`` as a user runs it: stored in config.json, kept and checked by --resume,
refused when no env takes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.clitools import cli


def test_env_option_is_stored_and_a_resume_must_match_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--quiet", "--output", str(out),
               "--env-option", "max_rows_shown=3", "--env-option", "DB-v0:statement_timeout=4.5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["env_options_by_env"] == {"AgentUnit/DB-v0": {"max_rows_shown": 3, "statement_timeout": 4.5}}
    again = cli("eval", "--resume", "--output", str(out), "--env-option", "max_rows_shown=3", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # the same value: nothing changes
    other = cli("eval", "--resume", "--output", str(out), "--env-option", "max_rows_shown=5", cwd=tmp_path)
    assert other.returncode == 2 and "env_options_by_env" in other.stderr


def test_an_option_no_env_takes_exits_2_naming_it(tmp_path: Path) -> None:
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--output", str(tmp_path / "r"),
               "--env-option", "endpoint=http://127.0.0.1:7878/query", cwd=tmp_path)
    assert done.returncode == 2
    assert "no env of this run names an option 'endpoint'" in done.stderr


def test_the_sandbox_limits_reach_the_os_env(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = cli("eval", "--env", "OS-v0", "--backend", "local", "-n", "1", "--quiet", "--output", str(out),
               "--env-option", "memory=256m", "--env-option", "disk=64m", "--env-option", "cpus=0.5",
               "--env-option", "pids_limit=128", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["env_options_by_env"] == {
        "AgentUnit/OS-v0": {"memory": "256m", "disk": "64m", "cpus": 0.5, "pids_limit": 128}}


def test_a_limit_that_does_not_parse_exits_2_naming_it(tmp_path: Path) -> None:
    done = cli("eval", "--env", "OS-v0", "--backend", "local", "-n", "1", "--output", str(tmp_path / "r"),
               "--env-option", "memory=lots", cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr[-800:])
    assert "memory must be a size such as '512m'" in done.stderr


def test_an_option_for_one_env_is_checked_against_it_and_its_backend(tmp_path: Path) -> None:
    # DB-v0 passes unknown keywords on to its backend: DB-v0:bogus=1 used to be stored and ignored.
    out = tmp_path / "r"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--output", str(out),
               "--env-option", "DB-v0:bogus=1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-800:]
    assert "--env-option 'DB-v0:bogus=1': AgentUnit/DB-v0 takes no option 'bogus'; its options: " in done.stderr
    assert "the sqlite backend's: none" in done.stderr
    assert not out.exists()


def test_backend_options_follow_the_backend_of_the_run() -> None:
    from agentunit_gym.errors import ConfigError
    from agentunit_gym.eval.plan.env_options import resolve_env_options

    db, shop = "AgentUnit/DB-v0", "AgentUnit/WebShop-v0"
    # Under auto the env may run on mysql: its container options are taken.
    assert resolve_env_options(["DB-v0:image=mysql:8"], [db]) == {db: {"image": "mysql:8"}}
    assert resolve_env_options(["WebShop-v0:start_timeout=30"], [shop], ["server"]) == {shop: {"start_timeout": 30}}
    with pytest.raises(ConfigError, match="takes no option 'image'.*the sqlite backend's: none"):
        resolve_env_options(["DB-v0:image=mysql:8"], [db], ["sqlite"])
    with pytest.raises(ConfigError, match="takes no option 'bogus'.*the mysql backend's: image, memory_limit"):
        resolve_env_options(["DB-v0:bogus=1"], [db])
