"""``load_sources``: items that fail beside ones that load are problems to report; a path from
which no task loads stops a run (``require_tasks``), naming every such path and its problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentunit_gym.core.task_sources import load_sources, problems_of
from agentunit_gym.errors import NoTasksError, TaskFileError
from tests.cli.test_tasks_option import NATIVE


def test_a_path_with_no_task_stops_only_when_tasks_are_required(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(NATIVE)
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(NATIVE.replace("tasks:\n", "tasks:\n- id: no-instruction\n  answer: ['1']\n"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("tasks: [\n")
    # Reporting (tasks validate, tasks check): every path is read, its problems listed.
    sources = load_sources([good, mixed, broken])
    assert [len(s.result.tasks) for s in sources] == [1, 1, 0]
    assert len(problems_of(sources)) == 2
    # Running: the broken path stops it; the mixed one runs its good item.
    assert [len(s.result.tasks) for s in load_sources([good, mixed], require_tasks=True)] == [1, 1]
    with pytest.raises(NoTasksError) as info:
        load_sources([good, broken, mixed], require_tasks=True)
    assert isinstance(info.value, TaskFileError) and info.value.paths == [str(broken)]
    assert len(info.value.problems) == 1 and info.value.problems[0].startswith(f"{broken}: not valid YAML")
    assert str(info.value).startswith(f"{broken}: no task loads from this path, so nothing runs")


def test_the_message_lists_ten_problems_then_counts_the_rest() -> None:
    error = NoTasksError(["a.json"], [f"a.json#{i}: bad" for i in range(13)])
    lines = str(error).splitlines()
    assert lines[1:11] == [f"  a.json#{i}: bad" for i in range(10)]
    assert lines[11] == "  ... and 3 more"
