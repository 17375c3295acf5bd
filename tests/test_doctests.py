"""The docstring examples of the package run as doctests, with their output checked.

Every module of the package is collected (none is listed by hand, so a new example runs
without anyone adding it), and every ``Example`` in a docstring is either a doctest (``>>>``)
or says why it is not run (``Example (not run: <reason>)::``, e.g. it needs Docker, a model
endpoint or an AgentBench checkout). The examples that start a container run under the
``docker`` marker."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentunit_gym"

NEEDS_DOCKER = {"agentunit_gym.backends.sql.mysql.backend"}
"""Modules whose examples start a container (the MariaDB server)."""

NOT_RUN = re.compile(r"^\s*Examples? \(not run: [^)]+\)::\s*$")
"""How an example that is not run says so, and why."""

EXAMPLE = re.compile(r"^\s*Examples?\b.*:\s*$")
"""The line that opens an example."""


def _module_name(path: Path) -> str:
    parts = ("agentunit_gym", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_modules() -> list[str]:
    """Every module of the package, but ``__main__`` (it runs the CLI when imported) and the
    scripts shipped into images (``images/``: they run inside a container, as programs)."""
    return [_module_name(path) for path in sorted(PACKAGE.rglob("*.py"))
            if path.name != "__main__.py" and path.relative_to(PACKAGE).parts[0] != "images"]


MODULES = _all_modules()


def _examples(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, header, runs)`` of each example in ``path``: ``runs`` when its block holds a ``>>>``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        if not EXAMPLE.match(line):
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for following in lines[number + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent and block:
                break
            block.append(following)
        found.append((number + 1, line.strip(), any(b.lstrip().startswith(">>>") for b in block)))
    return found


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


def test_every_module_is_collected() -> None:
    # Guards the collection: a change that finds nothing would pass every case below vacuously.
    assert len(MODULES) > 150 and NEEDS_DOCKER <= set(MODULES)
    assert {"agentunit_gym", "agentunit_gym.core.info", "agentunit_gym.eval.agents.info"} <= set(MODULES)


def test_every_example_runs_or_says_why_not() -> None:
    unmarked = [f"{path.relative_to(PACKAGE.parent)}:{line}: {header}"
                for path in sorted(PACKAGE.rglob("*.py")) for line, header, runs in _examples(path)
                if not runs and not NOT_RUN.match(header)]
    assert unmarked == [], "write these as doctests (>>>) or as 'Example (not run: <reason>)::'"


def test_the_example_reader_tells_a_doctest_from_prose(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('"""Doc.\n\nExample::\n\n    >>> 1 + 1\n    2\n\nExample::\n\n    f(x)\n\n'
                      'Example (not run: needs Docker)::\n\n    g(x)\n\nExamples:\n    h(x)\n"""\n', encoding="utf-8")
    assert [(h, r) for _, h, r in _examples(source)] == [
        ("Example::", True), ("Example::", False), ("Example (not run: needs Docker)::", False), ("Examples:", False)]


@pytest.mark.parametrize("name", [m for m in MODULES if m not in NEEDS_DOCKER])
def test_examples_run(name: str) -> None:
    results = _run(name)
    source = Path(importlib.import_module(name).__file__ or "").read_text(encoding="utf-8")
    assert results.attempted > 0 or ">>>" not in source, f"{name} holds '>>>' but no example doctest could find"


def test_a_broken_example_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_example.py").write_text('"""\n>>> 1 + 1\n3\n"""\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssertionError, match=r"Expected:\s+3\s+Got:\s+2"):
        _run("broken_example")


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(NEEDS_DOCKER))
def test_examples_that_start_a_container_run(name: str) -> None:
    assert _run(name).attempted > 0
