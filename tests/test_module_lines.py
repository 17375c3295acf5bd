"""No module of the package is over 600 lines (issue 35): a module that grows past it is split by
concern, the folder telling the story. tests/test_module_size.py holds stricter limits for eval/
and backends/sql/."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentunit_gym"
MAX_LINES = 600

# TEMPORARY (issue 35): the five modules other branches of issue 35 are shrinking, each held at
# the size it had when this test came, so none grows meanwhile. Delete an entry once its module
# is at most MAX_LINES (test_the_allowance_is_still_needed says which), then the dict.
ALLOWANCE: dict[str, int] = {
    "images/os/supervisor.py": 780,
    "backends/sandbox/local/box.py": 672,
    "backends/sandbox/local/shell.py": 601,
}


def _sizes() -> dict[str, int]:
    return {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in PACKAGE.rglob("*.py")}


def test_no_module_is_over_600_lines() -> None:
    sizes = _sizes()
    assert len(sizes) > 200 and "core/registry.py" in sizes  # the walk found the package
    over = {name: n for name, n in sorted(sizes.items()) if n > ALLOWANCE.get(name, MAX_LINES)}
    assert over == {}, f"split these by concern (at most {MAX_LINES} lines a module): {over}"


def test_the_allowance_is_still_needed() -> None:
    sizes = _sizes()
    done = sorted(name for name in ALLOWANCE if sizes.get(name, 0) <= MAX_LINES)
    assert done == [], f"these are at most {MAX_LINES} lines now (or gone): delete them from ALLOWANCE: {done}"
