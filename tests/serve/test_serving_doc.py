"""docs/serving.md stays true: its MCP client configs are JSON (its examples run in
tests/test_docs_examples.py, the MCP client's output checked)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")


def test_the_client_configs_are_json() -> None:
    blocks = re.findall(r"```json\n(.*?)```", PAGE.split("## MCP server", 1)[1], re.DOTALL)
    assert len(blocks) == 2
    for block in blocks:
        assert "mcpServers" in json.loads(block)
