"""Run folders: unique per eval, locked while written; ``--resume --output DIR`` alone takes the
stored settings; an interrupt prints the exact command that resumes."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentunit_gym.eval.record.records import read_records
from tests.cli.clitools import cli, default_sigint

SLOW = """\
import os
import time

from agentunit_gym.eval.agents.builtin import OracleAgent

# From this episode on, each reply takes seconds: an interrupt sent once the first episodes are
# recorded then lands mid-run however late a loaded machine lets the test notice them.
SLOW_FROM = int(os.environ.get("SLOW_FROM_EPISODE", "0"))


class Agent(OracleAgent):
    episodes = 0

    def reset(self, info):
        self.episodes += 1
        return super().reset(info)

    def act(self, observation, info):
        time.sleep(1.0 if SLOW_FROM and self.episodes >= SLOW_FROM else 0.2)
        return super().act(observation, info)
"""


def popen(*args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | (extra_env or {})
    return subprocess.Popen([sys.executable, "-m", "agentunit_gym", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint)


def test_two_evals_started_together_get_their_own_folders(tmp_path: Path) -> None:
    procs = [popen("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", str(n), "--quiet", cwd=tmp_path)
             for n in (2, 3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    folders = sorted((tmp_path / "results").iterdir())
    assert len(folders) == 2
    counts = sorted(len(read_records(f / "episodes.jsonl")) for f in folders)
    assert counts == [2, 3]  # no mixed records
    for folder in folders:
        config = json.loads((folder / "config.json").read_text())
        assert len(read_records(folder / "episodes.jsonl")) == config["n"]


def test_a_folder_in_use_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    with open(out / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write("4242")
        handle.flush()
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 2 and f"{out} is in use by another eval (pid 4242)" in done.stderr
    assert not (out / "episodes.jsonl").exists()


def test_resume_with_only_output_takes_the_stored_settings(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "3", "--seed", "5", "--runs", "2",
                "--quiet", "--output", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    episodes = out / "episodes.jsonl"
    lines = episodes.read_text().splitlines()
    episodes.write_text("\n".join(lines[:-2]) + "\n")  # as if the run had stopped two episodes short
    stored = (out / "config.json").read_text()
    again = cli("eval", "--resume", "--output", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "2 episodes run, 4 already done" in again.stderr.replace("\n", " ")
    assert (out / "config.json").read_text() == stored
    assert sorted(r.key for r in read_records(episodes)) == sorted(json.loads(x)["key"] for x in lines)
    # An option that contradicts the stored run is refused, naming it.
    other = cli("eval", "--resume", "--output", str(out), "--seed", "6", cwd=tmp_path)
    assert other.returncode == 2 and "seed" in other.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child")
def test_an_interrupt_prints_the_exact_resume_command(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    out = tmp_path / "run dir"
    proc = popen("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "10", "--concurrency", "1", "--quiet",
                 "--agent", "./slow.py:Agent", "--output", str(out), cwd=tmp_path,
                 extra_env={"SLOW_FROM_EPISODE": "3"})
    episodes = out / "episodes.jsonl"
    deadline = time.monotonic() + 60
    while not (episodes.exists() and episodes.read_text().count("\n") >= 2):
        assert proc.poll() is None and time.monotonic() < deadline, "no episode within 60 s"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    command = f"agentunit-gym eval --resume --output {shlex.quote(str(out))}"
    assert command in err
    done_before = len(read_records(episodes))
    assert 2 <= done_before < 10
    resumed = cli(*shlex.split(command)[1:], "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    records = read_records(episodes)
    assert len(records) == 10 and all(r.success for r in records)
