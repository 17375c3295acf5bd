"""Sampling and summarising latencies, shared by the benchmarks (run them from the repo root:
``python benchmarks/<name>.py``; this folder is then first on ``sys.path``)."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    """``repeat`` wall-clock samples of ``fn()``, in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    """n, p50, p90, mean, min and max of millisecond samples."""
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered),
        "p90_ms": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "mean_ms": statistics.fmean(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
    }


def own_cpu_s() -> float:
    """CPU seconds of this process and its reaped children (a local sandbox's processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def machine_busy_s() -> float:
    """CPU seconds the whole machine was busy (/proc/stat): daemons, containers, database
    servers and kernel workers included, and anything else running."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def write_result(result: dict[str, Any], path: Path) -> None:
    """Print ``result`` as JSON and write it to ``path`` (its dir made if needed)."""
    text = json.dumps(result, indent=2)
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
