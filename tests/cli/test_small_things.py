"""Point 7 of issue 10: compare on different task sets says so; the report's prompt box is not
cut mid-sentence; README claims about the examples stay true."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentunit_gym.core.registry import get_domain
from agentunit_gym.eval.report.html import clip
from tests.cli.clitools import ROOT, cli


def test_compare_on_different_task_sets_says_so_and_uses_the_shared_ones(tmp_path: Path) -> None:
    x, y, z = (t.id for t in get_domain("db").bundled_tasks()[:3])
    base = ["eval", "--env", "DB-v0", "--backend", "sqlite", "--quiet"]
    assert cli(*base, "--task-id", x, "--task-id", y, "--output", "a", cwd=tmp_path).returncode == 0
    assert cli(*base, "--task-id", y, "--task-id", z, "--agent", "random", "--output", "b",
               cwd=tmp_path).returncode == 0
    done = cli("compare", "a", "b", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 task(s) only in A, 1 only in B; compared on the 1 shared task(s) only" in done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert rows["success_rate"]["a"] == 1.0 and rows["success_rate"]["b"] == 0.0  # task y alone on both sides
    report = (tmp_path / "a" / "report.html").read_text()
    traces = json.loads(re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', report,
                                  re.DOTALL).group(1))  # type: ignore[union-attr]
    for trace in traces:
        task = next(t for t in get_domain("db").bundled_tasks() if t.id in trace["key"])
        assert task.instruction in trace["prompt"]  # the whole prompt, task included, not its first 600 characters


def test_clip_cuts_at_a_sentence_and_says_how_much() -> None:
    text = "First sentence here. Second one follows. " * 40
    clipped = clip(text, 200)
    assert clipped.endswith("more characters]")
    kept = clipped.split(" [... ")[0]
    assert kept.endswith(".") and len(kept) <= 200 and text.startswith(kept)
    assert int(re.search(r"\[\.\.\. (\d+) more", clipped).group(1)) == len(text) - len(kept)  # type: ignore[union-attr]
    assert clip("short", 200) == "short"


def test_readme_vector_env_claim_matches_the_example() -> None:
    readme = (ROOT / "README.md").read_text()
    claim = re.search(r"examples/rl_bandit\.py\) uses an? `(\w+VectorEnv)`", readme)
    assert claim is not None, "the README says which vector env the example uses"
    assert f"gym.vector.{claim.group(1)}(" in (ROOT / "examples" / "rl_bandit.py").read_text()


def test_the_license_pyproject_declares_is_there() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'license\s*=\s*["{].*Apache-2\.0', pyproject)
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0" in text
