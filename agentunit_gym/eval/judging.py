"""Judge a run and refresh its summary and report (what ``agentunit-gym judge`` and
``eval --judge`` call): the judge stage, then the report stage, over a recorded run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agentunit_gym.eval.judge.run import JudgeConfig, JudgeOutcome, ProgressFn, judge_run
from agentunit_gym.eval.record.records import RunPaths
from agentunit_gym.eval.report.html import write_report
from agentunit_gym.eval.report.summary import summarize


def judge_and_report(run_dir: Path, config: JudgeConfig, *,
                     progress: ProgressFn | None = None) -> tuple[JudgeOutcome, dict[str, Any], Path]:
    """Judge the episodes of ``run_dir`` not judged yet, then rewrite ``summary.json`` and ``report.html``.

    Returns:
        What the judge did, the new summary, and the report's path.

    Raises:
        ConfigError: not a run directory, or judged before with other options.
    """
    outcome = asyncio.run(judge_run(run_dir, config, progress=progress))
    paths = RunPaths(run_dir)
    stored = json.loads(paths.config.read_text(encoding="utf-8")) if paths.config.exists() else {}
    summary = summarize(run_dir, seed=int(stored.get("seed") or 0))
    return outcome, summary, write_report(run_dir)


__all__ = ["judge_and_report"]
