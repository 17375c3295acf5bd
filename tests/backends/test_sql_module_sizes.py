"""Issue 24: no module of backends/sql/ past 450 lines (split by concern instead)."""

from __future__ import annotations

from pathlib import Path

import agentunit_gym.backends.sql as sql_package

MAX_LINES = 450


def test_no_sql_backend_module_is_over_450_lines() -> None:
    root = Path(sql_package.__file__).parent
    sizes = {str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
             for path in root.rglob("*.py")}
    assert "mysql/backend.py" in sizes  # the walk found the package's modules
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
