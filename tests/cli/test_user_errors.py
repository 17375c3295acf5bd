"""User mistakes get one clear line and exit 2, never a traceback or an empty results folder."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.config import EvalConfig
from tests.cli.clitools import cli

MISTAKES = [
    (["--env", "OS-v9"], "unknown env 'OS-v9'. Did you mean OS-v0?"),
    (["--env", "Os-v0"], "Did you mean OS-v0?"),
    (["-n", "0"], "argument -n: must be at least 1, got 0"),
    (["--runs", "0"], "argument --runs: must be at least 1, got 0"),
    (["--concurrency", "0"], "argument --concurrency: must be at least 1, got 0"),
    (["--trap-rate", "2"], "argument --trap-rate: must be between 0 and 1"),
    (["--output", "a_file.txt"], "--output a_file.txt is a file"),
    (["--resume", "--output", "empty"], "empty holds no run"),
]


def test_each_mistake_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a_file.txt").write_text("not a folder")
    (tmp_path / "empty").mkdir()
    for args, message in MISTAKES:
        done = cli("eval", *args, cwd=tmp_path, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (args, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt", "empty"]  # no results folder
    assert list((tmp_path / "empty").iterdir()) == []


def test_gym_make_with_the_wrong_case_says_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"'AgentUnit/Os-v0'; did you mean AgentUnit/OS-v0\?"):
        gym.make("AgentUnit/Os-v0")
    with pytest.raises(ConfigError, match=r"did you mean AgentUnit/DB-v0\?"):
        gym.make("AgentUnit/db-v0")


def test_evaluate_takes_a_str_output_and_leaves_nothing_when_refused(tmp_path: Path) -> None:
    out = str(tmp_path / "run")
    result = evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), n=1), out)
    assert result.run_dir == Path(out) and (Path(out) / "summary.json").exists()
    refused = tmp_path / "refused"
    with pytest.raises(ConfigError, match="task ids"):
        evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), task_ids=("no-such-task",)), str(refused))
    assert not refused.exists()
