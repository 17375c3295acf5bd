"""``--agent module:attr`` from the current folder and ``--agent ./file.py:attr``; errors say where they looked."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.eval.record.records import read_records
from tests.cli.clitools import cli

ORACLE_LIKE = """\
from agentunit_gym.eval.agents.builtin import OracleAgent


class Agent(OracleAgent):
    pass
"""


def test_module_from_the_current_folder_and_a_file_path(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(ORACLE_LIKE)
    for spec in ("my_agent:Agent", "./my_agent.py:Agent", str(tmp_path / "my_agent.py") + ":Agent"):
        out = tmp_path / spec.replace("/", "_").replace(":", "_")
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", spec, "--quiet",
                   "--output", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        (record,) = read_records(out / "episodes.jsonl")
        assert record.success and record.agent == spec


def test_import_errors_say_where_they_looked(tmp_path: Path) -> None:
    module = cli("eval", "--env", "DB-v0", "--agent", "nowhere_agent:Agent", cwd=tmp_path)
    assert module.returncode == 2
    assert f"looked in the current folder {tmp_path}" in module.stderr and "./nowhere_agent.py:Agent" in module.stderr
    file = cli("eval", "--env", "DB-v0", "--agent", "./nowhere.py:Agent", cwd=tmp_path)
    assert file.returncode == 2 and f"looked for {tmp_path / 'nowhere.py'}" in file.stderr
    (tmp_path / "half.py").write_text("x = 1\n")
    attr = cli("eval", "--env", "DB-v0", "--agent", "half:Agent", cwd=tmp_path)
    assert attr.returncode == 2 and f"{tmp_path / 'half.py'} has no attribute 'Agent'" in attr.stderr
    for done in (module, file, attr):
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "results").exists()
