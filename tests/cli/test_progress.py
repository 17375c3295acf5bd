"""Long commands say they are alive: ``tasks check`` and ``tasks generate`` write progress to
standard error, a line per N items when it is a file or a pipe (issue 36, item 6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentunit_gym.cli.console import ItemProgress
from tests.cli.clitools import cli


def test_progress_lines_come_every_n_items_and_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    with ItemProgress("work", every=3) as progress:
        for done in range(8):
            progress(done, 7, f"item {done}")
    lines = capsys.readouterr().err.splitlines()
    counts = [re.match(r"work: (\d+)/7 \(\d+ s\); item \d+$", line) for line in lines]
    assert all(counts), lines
    assert [int(m.group(1)) for m in counts if m] == [0, 3, 6, 7]


def test_a_quiet_progress_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with ItemProgress("work", every=1, quiet=True) as progress:
        progress(1, 2)
        progress(2, 2)
    assert capsys.readouterr().err == ""


def test_tasks_generate_and_check_report_progress_through_a_pipe(tmp_path: Path) -> None:
    made = cli("tasks", "generate", "--env", "DB-v0", "-n", "30", "--split", "train", "--output", "set.json",
               "--progress-every", "10", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    drawn = re.findall(r"^tasks generate: (\d+)/30 ", made.stderr, re.MULTILINE)
    assert drawn == ["0", "10", "20", "30"], made.stderr
    checked = cli("tasks", "check", "set.json", "--backend", "sqlite", "--progress-every", "10", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr + checked.stdout
    episodes = [int(n) for n in re.findall(r"^tasks check: oracle episodes: (\d+)/30 ", checked.stderr, re.MULTILINE)]
    assert episodes[0] == 1 and episodes[-1] == 30 and {10, 20} <= set(episodes), checked.stderr
    assert "ok: every item loaded and passed" in checked.stdout
