"""docs/serving.md stays true: its MCP client example runs and prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def test_the_mcp_client_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    found = re.search(r"### Example: a client in Python.*?```python\n(.*?)```\n\n```\n(.*?)```", PAGE, re.DOTALL)
    assert found is not None, "docs/serving.md lost its MCP client example"
    script = tmp_path / "example.py"
    script.write_text(found.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == found.group(2)


def test_the_client_configs_are_json() -> None:
    import json

    blocks = re.findall(r"```json\n(.*?)```", PAGE.split("## MCP server", 1)[1], re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        assert "mcpServers" in json.loads(block)
