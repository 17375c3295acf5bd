"""No module of the package is over 600 lines (issue 35): a module that grows past it is split by
concern, the folder telling the story. tests/test_module_size.py holds stricter limits for eval/
and backends/sql/."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentunit_gym"
MAX_LINES = 600


def _sizes() -> dict[str, int]:
    return {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in PACKAGE.rglob("*.py")}


def test_no_module_is_over_600_lines() -> None:
    sizes = _sizes()
    assert len(sizes) > 200 and "core/registry.py" in sizes  # the walk found the package
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert over == {}, f"split these by concern (at most {MAX_LINES} lines a module): {over}"

