"""docs/changelog.md keeps one section per env id, since the ``-vN`` rule needs one."""

from __future__ import annotations

import re
from pathlib import Path

from agentunit_gym.core import registry

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "docs" / "changelog.md"


def _sections() -> dict[str, str]:
    text = CHANGELOG.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    return {part.splitlines()[0].strip(): part for part in parts}


def test_every_built_in_env_id_has_a_section_with_its_first_registration() -> None:
    sections = _sections()
    built_in = [e for d in registry.domains() if d.envs[0].entry_point.startswith("agentunit_gym.")
                for e in d.env_ids]
    assert len(built_in) >= 4
    for env_id in built_in:
        assert f"`{env_id}`" in sections, f"docs/changelog.md has no section for {env_id}"
        assert "First registered" in sections[f"`{env_id}`"]
    assert "The `-vN` rule" in sections


def test_each_entry_names_a_commit_of_this_repository() -> None:
    import subprocess

    hashes = set(re.findall(r"\b([0-9a-f]{7})\b", CHANGELOG.read_text(encoding="utf-8")))
    assert len(hashes) > 20
    if not (ROOT / ".git").exists():
        return  # an installed copy: no history to check against
    known = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%h", "--abbrev=7", "--all"],
                           capture_output=True, text=True, timeout=30, check=True).stdout.split()
    assert hashes - set(known) == set(), "entries name commits that do not exist"


def test_each_env_page_links_to_its_section() -> None:
    for page in sorted((ROOT / "docs" / "envs").glob("*.md")):
        assert "](../changelog.md#agentunit" in page.read_text(encoding="utf-8"), page.name
