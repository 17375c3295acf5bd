"""Where the bundled KG suite lives (package data beside this module)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled_suite_path() -> Path:
    """The folder of the bundled KG task files."""
    return Path(str(resources.files("agentunit_gym.domains.kg").joinpath("suite")))
