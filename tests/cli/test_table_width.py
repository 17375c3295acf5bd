"""Tables written to a file or a pipe are not cut at 80 columns (issue 36, item 6)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.table import Table

from agentunit_gym.cli.console import UNBOUNDED_WIDTH, table_console
from tests.cli.clitools import cli


def _wide_table() -> Table:
    table = Table()
    for name in ("env", "metric", "value"):
        table.add_column(name)
    table.add_row("AgentUnit/WebShop-v0", "db_select_accuracy_with_a_long_name", "0.123456789")
    table.add_row("x" * 150, "y", "z")
    return table


def test_a_piped_console_prints_every_column_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = table_console(file=out)
    assert console.width == UNBOUNDED_WIDTH
    console.print(_wide_table())
    text = out.getvalue()
    assert "AgentUnit/WebShop-v0" in text and "db_select_accuracy_with_a_long_name" in text
    assert "x" * 150 in text and "…" not in text
    # The table keeps its natural width: no line is padded out to the console's.
    assert max(len(line) for line in text.splitlines()) < 300


def test_columns_names_the_width_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    console = table_console(file=out)
    assert console.width == 60
    console.print(_wide_table())
    assert max(len(line) for line in out.getvalue().splitlines()) <= 60


def test_eval_summary_through_a_pipe_has_full_names(tmp_path: Path) -> None:
    environment = dict(os.environ)
    environment.pop("COLUMNS", None)
    result = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "2", "--output", str(tmp_path / "run"),
                 cwd=tmp_path, env={"COLUMNS": ""})
    assert result.returncode == 0, result.stderr
    assert "AgentUnit/DB-v0" in result.stdout
    assert "…" not in result.stdout, result.stdout
