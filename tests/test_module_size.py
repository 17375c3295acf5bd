"""Modules stay split by concern: none in eval/ or backends/sql/ over 450 lines (issue 24), none
in the local sandbox's package or the OS image's supervisor and shell driver over 600 (issues 23, 35)."""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentunit_gym"
LIMITS = {"eval": 450, "backends/sql": 450, "backends/sandbox/local": 600, "images/os": 600}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("folder", sorted(LIMITS))
def test_no_module_over_the_limit(folder: str) -> None:
    limit = LIMITS[folder]
    modules = list((PACKAGE / folder).rglob("*.py"))
    assert len(modules) >= 3, f"{folder} is meant to be a package split by concern"
    too_long = {str(p.relative_to(PACKAGE)): _lines(p) for p in modules if _lines(p) > limit}
    assert too_long == {}, f"split these by concern (limit {limit} lines): {too_long}"


def test_the_metrics_package_keeps_the_old_import_path() -> None:
    from agentunit_gym.eval.report import metrics
    from agentunit_gym.eval.report.metrics.compute import compute_metrics

    assert metrics.compute_metrics is compute_metrics
    assert {"Episode", "MetricValue", "MetricDef", "CATALOG", "finish_distribution", "group_by_task",
            "succeeded", "echoes_example", "headlines", "definitions", "metric_names"} <= set(metrics.__all__)
