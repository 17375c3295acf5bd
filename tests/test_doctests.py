"""The docstring examples (``>>>``) of the package run as doctests, with their output checked.

Every module of the package whose source holds an example is found here (none is listed by
hand, so a new example runs without anyone adding it); the examples that start a container
run under the ``docker`` marker."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentunit_gym"

NEEDS_DOCKER = {"agentunit_gym.backends.sql.mysql.backend"}
"""Modules whose examples start a container (the MariaDB server)."""


def _modules_with_examples() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = ("agentunit_gym", *path.relative_to(PACKAGE).with_suffix("").parts)
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = _modules_with_examples()


def _run(name: str) -> doctest.TestResults:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name)
    report: list[str] = []
    for test in tests:
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)
    return results


def test_the_examples_are_found() -> None:
    # Guards the finder: a change that finds nothing would pass every case below vacuously.
    assert len(MODULES) >= 10 and NEEDS_DOCKER <= set(MODULES)


@pytest.mark.parametrize("name", [m for m in MODULES if m not in NEEDS_DOCKER])
def test_examples_run(name: str) -> None:
    assert _run(name).attempted > 0, f"{name} holds '>>>' but no example doctest could find"


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(NEEDS_DOCKER))
def test_examples_that_start_a_container_run(name: str) -> None:
    assert _run(name).attempted > 0
