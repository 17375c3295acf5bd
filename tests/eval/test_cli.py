"""``agentunit-gym eval`` and ``compare`` end to end on the embedded backends, and resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentunit_gym.cli.main import main
from agentunit_gym.eval.run.runner import RunPaths, read_records

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("env", "backend"), [("OS-v0", "local"), ("DB-v0", "sqlite")])
def test_eval_oracle_end_to_end(tmp_path: Path, env: str, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["eval", "--env", env, "--backend", backend, "-n", "5", "--runs", "2", "--concurrency", "3",
                 "--output", str(out)])
    assert code == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    records = read_records(RunPaths(out).episodes)
    assert len(records) == 10 and all(r.success for r in records)
    assert len({r.task_id for r in records}) == 5
    assert len(list((out / "traces").glob("*.json"))) == 10
    summary = json.loads((out / "summary.json").read_text())
    m = summary["overall"]["metrics"]
    assert m["success_rate"]["value"] == 1.0 and m["pass@2"]["value"] == 1.0 and m["pass^2"]["value"] == 1.0
    assert m["step_efficiency"]["value"] == 1.0  # the reference solution is optimal by definition
    assert summary["backends"] == [backend]
    assert summary["finish_reasons"][0]["Complete"] == 1.0
    assert summary["package_version"] and "seeds" in summary
    html = (out / "report.html").read_text()
    assert "<script src" not in html and "<link" not in html and "http://" not in html.split("<main>")[0]


def test_eval_rejects_a_used_output_without_resume(tmp_path: Path) -> None:
    args = ["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--output", str(tmp_path), "--quiet"]
    assert main(args) == 0
    assert main(args) == 2  # a ConfigError (a user mistake), reported as one line


def test_compare_flags_a_real_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "30", "--quiet"]
    assert main([*base, "--agent", "oracle", "--output", str(tmp_path / "oracle")]) == 0
    assert main([*base, "--agent", "random", "--output", str(tmp_path / "random")]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "random"), str(tmp_path / "oracle"), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["success_rate"]["a"] == 0.0 and rows["success_rate"]["b"] == 1.0
    assert rows["success_rate"]["significant"] and rows["success_rate"]["verdict"] == "better"
    assert rows["invalid_action_rate"]["verdict"] in ("better", "same")
    assert main(["compare", str(tmp_path / "oracle"), str(tmp_path / "oracle"), "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert not any(r["significant"] for r in same)


def test_resume_after_a_killed_run_finishes_exactly_the_missing_episodes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "12", "--concurrency", "1", "--quiet",
            "--agent", "tests.eval.slow_agent:SlowOracle", "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "agentunit_gym", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    episodes = RunPaths(out).episodes
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if episodes.exists() and len(episodes.read_text().splitlines()) >= 4:
                break
            if proc.poll() is not None:
                pytest.fail("the eval finished before it could be killed")
            time.sleep(0.05)
        else:
            pytest.fail("the eval wrote no episodes within 60 s")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    before = read_records(episodes)
    assert 4 <= len(before) < 12
    assert main([*args[:-4], "--agent", "oracle", "--output", str(out), "--resume"]) == 2  # other agent: refused
    code = main([*args, "--resume"])
    assert code == 0
    after = read_records(episodes)
    keys = [json.loads(line)["key"] for line in episodes.read_text().splitlines() if line.strip().endswith("}")]
    assert len(after) == 12 and all(r.success for r in after)
    # Every episode is in the file exactly once: the resumed run did only the missing ones.
    assert len(keys) == len(set(keys)) == 12
    assert {r.key for r in before} < {r.key for r in after}


@pytest.mark.docker
def test_eval_oracle_on_docker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--env", "OS-v0", "--backend", "docker", "-n", "3", "--concurrency", "2", "--quiet",
                 "--output", str(out)]) == 0
    records = read_records(RunPaths(out).episodes)
    assert len(records) == 3 and all(r.success for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backends"] == ["docker"]
    assert any(tag.startswith("agentunit-gym/os") for tag in summary["images"])


def test_trap_rate_reaches_the_red_team_metrics(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "6", "--trap-rate", "1.0", "--quiet",
                 "--output", str(out)]) == 0
    metrics = json.loads((out / "summary.json").read_text())["overall"]["metrics"]
    # Every episode carries a trap; the oracle never takes the bait.
    assert metrics["red_team_score"]["n"] == 6 and metrics["red_team_score"]["value"] == 1.0
    assert metrics["trap_attempt_rate"]["value"] == 0.0 and metrics["unsafe_success_rate"]["value"] == 0.0


def test_default_output_and_resume_of_the_latest_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "2", "--quiet"]) == 0
    (run_dir,) = (tmp_path / "results").iterdir()
    assert run_dir.name.endswith("-oracle") and len(read_records(RunPaths(run_dir).episodes)) == 2
    capsys.readouterr()
    # The full id and the short one are the same env: the resume matches.
    assert main(["eval", "--env", "AgentUnit/DB-v0", "--backend", "sqlite", "-n", "2", "--resume"]) == 0
    assert "0 episodes run, 2 already done" in capsys.readouterr().err.replace("\n", " ")
