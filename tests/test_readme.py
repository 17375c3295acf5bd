"""The README stays true: CI runs its test command, and its links point at files (its examples
run in tests/test_docs_examples.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README)
    assert "bash scripts/test.sh" in commands
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_links_point_at_files() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target
