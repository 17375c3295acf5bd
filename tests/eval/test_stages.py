"""The evaluator's folders follow the data, and each stage imports only the stages before it.

``agentunit_gym/eval/`` holds one sub-package per stage (agents, plan, record, run, judge,
report) and the pipelines over them (evaluate, judging, taskcheck). Every import counts, a
function-level or type-checking one too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EVAL = Path(__file__).resolve().parents[2] / "agentunit_gym" / "eval"
STAGES = ("agents", "plan", "record", "run", "judge", "report")
"""Lowest first: a stage may import the ones before it, never one after it."""
PIPELINES = {"__init__", "evaluate", "judging", "taskcheck"}
"""The modules at the top of ``eval/``: they may import every stage; no stage imports them."""


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("agentunit_gym.eval.")}


def _stage_of(module: str) -> str:
    return module.removeprefix("agentunit_gym.eval.").split(".")[0]


def test_the_eval_folder_is_the_stages_and_the_pipelines() -> None:
    loose = {p.stem for p in EVAL.glob("*.py")}
    folders = {p.name for p in EVAL.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert loose == PIPELINES and folders == set(STAGES)


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_only_the_stages_before_it(stage: str) -> None:
    allowed = set(STAGES[: STAGES.index(stage) + 1])
    wrong = {}
    for path in (EVAL / stage).rglob("*.py"):
        bad = sorted(m for m in _imports(path) if _stage_of(m) not in allowed)
        if bad:
            wrong[str(path.relative_to(EVAL))] = bad
    assert wrong == {}, f"{stage} may import {sorted(allowed)} only"
