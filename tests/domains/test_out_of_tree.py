"""A third-party domain, installed as its own package, works end to end.

The example package (examples/echo-domain: its own pyproject with an entry point, an env,
a task model, three tasks) is copied to a temp dir and ``pip install``-ed into a folder of
its own (``--target``), never into the shared environment. Fresh interpreters that see
that folder then make its env with ``gym.make``, list its tasks, and evaluate it with the
oracle agent; its rows must be in summary.json and report.html.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "echo-domain"
ENV_ID = "EchoCorp/Echo-v0"
TASK_IDS = ("echo-apple", "echo-river", "echo-lantern")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("third_party")
    source = root / "echo-domain"
    shutil.copytree(EXAMPLE, source)
    target = root / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert any(p.name.startswith("agentunit_echo_domain") and p.suffix == ".dist-info" for p in target.iterdir())
    return target


def run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, check=False,
                          env=env, cwd=cwd)


def test_it_is_not_installed_in_the_shared_environment(site: Path) -> None:
    assert importlib.util.find_spec("echo_domain") is None
    from agentunit_gym.core.registry import domain_names

    assert "echo" not in domain_names()


def test_gym_make_runs_its_env(site: Path) -> None:
    code = (
        "import json, gymnasium as gym, agentunit_gym\n"
        f"env = gym.make({ENV_ID!r})\n"
        "obs, info = env.reset(options={'task_id': 'echo-river'})\n"
        "look = env.step('Act: look()')\n"
        "wrong = None\n"
        "end = env.step('Act: say(river)')\n"
        "env.reset(options={'task_id': 'echo-apple'})\n"
        "bad = env.step('Act: say(pear)')\n"
        "print(json.dumps({'obs': obs, 'domain': info['domain'], 'max_steps': info['max_steps'],\n"
        "                  'look': look[0], 'end': [end[1], end[2], end[4]['finish_reason'].value],\n"
        "                  'bad': [bad[1], bad[4]['score']['success']]}))\n"
    )
    done = run(site, "-c", code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "Task: Say the word 'river'." in out["obs"] and out["domain"] == "echo" and out["max_steps"] == 4
    assert out["look"] == "The word is 'river'."
    assert out["end"] == [1.0, True, "complete"]
    assert out["bad"] == [0.0, False]


def test_tasks_list_shows_its_tasks(site: Path) -> None:
    done = run(site, "-m", "agentunit_gym", "tasks", "list", "--domain", "echo")
    assert done.returncode == 0, done.stderr
    for task_id in TASK_IDS:
        assert task_id in done.stdout
    assert "3 task(s)" in done.stdout
    everything = run(site, "-m", "agentunit_gym", "tasks", "list")
    assert all(t in everything.stdout for t in TASK_IDS) and "os-" in everything.stdout and "db-" in everything.stdout


def test_eval_with_the_oracle_writes_its_rows(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run(site, "-m", "agentunit_gym", "eval", "--env", ENV_ID, "--agent", "oracle", "--output", str(out),
               "--quiet")
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["episodes"] == 3
    env_block = summary["per_env"][ENV_ID]
    assert env_block["episodes"] == 3 and env_block["metrics"]["success_rate"]["value"] == 1.0
    assert summary["per_domain"]["echo"]["title"] == "Echo"
    assert summary["per_domain"]["echo"]["sections"][0]["title"] == "Echo"
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(TASK_IDS)
    report = (out / "report.html").read_text(encoding="utf-8")
    assert ENV_ID in report and "domain-echo" in report
    for task_id in TASK_IDS:
        assert task_id in report
