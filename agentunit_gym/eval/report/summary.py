"""The summary of a run: metrics with intervals overall, per env, per agent and per domain
(with the domain's report sections), the finish reason table, provenance (package and
image versions, config, seeds, git revision), and, once the run is judged, the ``judge``
block (judged metrics, the judge's agreement with the env's check, the criteria).

Written to ``summary.json``; ``report.html`` and ``agentunit-gym compare`` read it.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from agentunit_gym.core import registry
from agentunit_gym.eval.record.records import NOT_MEASURED
from agentunit_gym.eval.report.judged import judged_block
from agentunit_gym.eval.report.metrics import Episode, compute_metrics, finish_distribution, group_by_task
from agentunit_gym.eval.run.runner import EpisodeRecord, RunPaths, iter_records

SUMMARY_VERSION = 1


def load_episodes(run_dir: Path) -> tuple[list[EpisodeRecord], list[Episode]]:
    """The records of a run and the episodes the metrics count.

    Episodes whose infrastructure failed for good (``infra_error``) have no trace, and those
    whose model endpoint went away (``endpoint_error``) were cut short by it: neither is
    counted in the metrics (they are in the records and the ``status`` counts, and a
    ``--resume`` re-runs them).
    """
    records: list[EpisodeRecord] = []
    episodes: list[Episode] = []
    for record, trace in iter_records(run_dir):
        records.append(record)
        if trace is not None and record.status not in NOT_MEASURED:
            episodes.append(Episode(trace=trace, run=record.run, agent=record.agent))
    records.sort(key=lambda r: (r.env_id, r.task_id, r.run))
    episodes.sort(key=lambda e: (e.trace.env_id or "", e.trace.task_id, e.run))
    return records, episodes


def git_revision(start: Path | None = None) -> str | None:
    """The git commit of the source tree the package runs from, when it is a checkout."""
    from agentunit_gym.backends import process
    from agentunit_gym.errors import AgentUnitError

    where = start or Path(__file__).resolve().parent
    if process.which("git") is None:
        return None
    try:
        result = process.run(["git", "-C", str(where), "rev-parse", "HEAD"], timeout=5.0)
    except AgentUnitError:
        return None
    if result.returncode != 0:
        return None
    revision = result.stdout.decode().strip()
    try:
        dirty = process.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"], timeout=5.0)
        if dirty.returncode == 0 and dirty.stdout.strip():
            revision += "-dirty"
    except AgentUnitError:
        pass
    return revision


def image_versions() -> dict[str, str]:
    """Tags and ids of the project's Docker images on this machine (empty without a daemon)."""
    from agentunit_gym.backends import process
    from agentunit_gym.errors import AgentUnitError

    if not process.docker_available(timeout=2.0):
        return {}
    try:
        client = process.docker_client(timeout=10.0)
        images = client.images.list()
    except AgentUnitError:
        return {}
    except Exception:  # noqa: BLE001 - provenance is best effort; a daemon error must not lose the summary
        return {}
    out: dict[str, str] = {}
    for image in images:
        for tag in image.tags:
            if tag.startswith("agentunit-gym"):
                out[tag] = image.id
    return out


def docker_backends() -> set[str]:
    """Names of the registered domains' backends that run on a Docker daemon."""
    return {b.name for d in registry.domains() for b in d.backends if b.needs_docker}


def domain_blocks(episodes: list[Episode], *, seed: int = 0) -> dict[str, Any]:
    """Per registered domain with episodes in the run: its title, its episode count, every
    metric over its episodes, and its report sections (``{title, description, metrics}``)."""
    out: dict[str, Any] = {}
    for domain in registry.domains():
        subset = [e for e in episodes if e.trace.domain == domain.name]
        if not subset:
            continue
        out[domain.name] = {
            "title": domain.title,
            "env_ids": list(domain.env_ids),
            **compute_metrics(subset, seed=seed).to_dict(),
            "headline": domain.headline.name if domain.headline else None,
            "sections": [{"title": s.title, "description": s.description, "metrics": list(s.metrics)}
                         for s in domain.report_sections],
        }
    return out


def summarize(run_dir: Path, *, seed: int = 0, with_images: bool | None = None) -> dict[str, Any]:
    """Compute and write ``summary.json`` for the run in ``run_dir``.

    Args:
        run_dir: the run directory.
        seed: seeds the bootstrap intervals.
        with_images: record Docker image versions; default: when an episode ran on docker.

    Returns:
        The summary as written.
    """
    from agentunit_gym.version import __version__

    paths = RunPaths(run_dir)
    records, episodes = load_episodes(run_dir)
    config = json.loads(paths.config.read_text(encoding="utf-8")) if paths.config.exists() else {}
    backends = sorted({e.trace.backend for e in episodes})
    if with_images is None:
        with_images = bool(set(backends) & docker_backends())
    per_env: dict[str, Any] = {}
    for env_id in sorted({e.trace.env_id or e.trace.domain for e in episodes}):
        subset = [e for e in episodes if (e.trace.env_id or e.trace.domain) == env_id]
        per_env[env_id] = compute_metrics(subset, seed=seed).to_dict()
    per_agent: dict[str, Any] = {}
    for agent in sorted({e.agent for e in episodes}):
        subset = [e for e in episodes if e.agent == agent]
        per_agent[agent] = compute_metrics(subset, seed=seed).to_dict()
    per_domain = domain_blocks(episodes, seed=seed)
    finish = [{"env": env, "agent": agent, **row} for (env, agent), row in finish_distribution(episodes).items()]
    status_counts: dict[str, int] = {}
    for r in records:
        status_counts[r.status] = status_counts.get(r.status, 0) + 1
    overall = compute_metrics(episodes, seed=seed).to_dict()
    summary: dict[str, Any] = {
        "summary_version": SUMMARY_VERSION,
        "created_at": time.time(),
        "package_version": __version__,
        "python": platform.python_version(),
        "git_revision": git_revision(),
        "images": image_versions() if with_images else {},
        "config": config,
        "seeds": {"run": config.get("seed"), "bootstrap": seed,
                  "episodes": {r.key: r.seed for r in records}},
        "backends": backends,
        "episodes": len(records),
        "status": status_counts,
        "overall": overall,
        "per_env": per_env,
        "per_agent": per_agent,
        "per_domain": per_domain,
        "finish_reasons": finish,
        "intervals": interval_methods(episodes),
        "left_out": json.loads(paths.left_out.read_text(encoding="utf-8")) if paths.left_out.exists() else [],
    }
    judged = judged_block(run_dir, {r.key for r in records if r.status not in NOT_MEASURED and r.trace}, seed=seed)
    if judged is not None:
        # The judged metrics join the catalog (table, report, chart); the block keeps the criteria and agreement.
        summary["judge"] = judged
        overall["metrics"].update(judged["metrics"])
    paths.summary.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary


def interval_methods(episodes: list[Episode]) -> dict[str, Any]:
    """How this run's 95% intervals were computed (each metric's ``ci_method`` says it too):
    with repeats, whole tasks are resampled, since a task's repeats are not independent."""
    repeated = any(len(g) > 1 for g in group_by_task(episodes).values())
    return {
        "resampling_unit": "task" if repeated else "episode",
        "rate": "cluster_bootstrap" if repeated else "wilson",
        "mean_and_ratio": "cluster_bootstrap" if repeated else "bootstrap",
        "task_level": "bootstrap",
        "headline": "stratified_bootstrap",
        "resamples": 2000,
        "level": 0.95,
    }


def load_summary(run_dir: Path) -> dict[str, Any]:
    """Read a run's ``summary.json``, computing it first when missing.

    Raises:
        ConfigError: ``run_dir`` is not a run directory.
    """
    from agentunit_gym.errors import ConfigError

    paths = RunPaths(run_dir)
    if paths.summary.exists():
        return dict(json.loads(paths.summary.read_text(encoding="utf-8")))
    if not paths.episodes.exists():
        raise ConfigError(f"{run_dir} is not a run directory (no summary.json or episodes.jsonl).")
    return summarize(run_dir)
