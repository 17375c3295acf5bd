"""docs/training.md stays true: the example of each of its sections runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text(encoding="utf-8")
SECTIONS = ("Vector envs", "Info keys", "Pickling and processes", "Groups (GRPO)", "Shaped rewards", "Chat messages")


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", DOC, re.DOTALL | re.MULTILINE)
    assert match is not None, f"docs/training.md has no section {title!r}"
    return match.group(1)


@pytest.mark.parametrize("title", SECTIONS)
def test_section_example_runs(title: str, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```\n", _section(title), re.DOTALL)
    assert blocks, f"section {title!r} has no python example"
    for block in blocks:
        exec(compile(block, f"docs/training.md ({title})", "exec"), {"__name__": "docs_training"})
    printed = capsys.readouterr().out
    if title == "Shaped rewards":
        assert printed.split("\n")[:2] == ["-0.1", "0.5 0.0"]
    if title == "Info keys":
        assert printed.strip() == "{} no_call ''"
