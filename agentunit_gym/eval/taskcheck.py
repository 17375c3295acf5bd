"""Check task files end to end: what loads, and what the oracle agent runs and passes.

:func:`check_tasks` reads each path as ``--tasks`` does (every registered domain's task model
and loaders, :mod:`agentunit_gym.core.task_sources`), runs the oracle agent over the tasks
that converted with :func:`~agentunit_gym.eval.evaluate.evaluate`, and counts per source file:
items loaded, items that did not convert (with file, line or item and reason), episodes that
ran, passed and failed (with the episode's finish reason, error or task error), and items not
run (a backend that cannot run them, or ``needs network (not run; pass --network)`` for items
that need the network when the check runs without it). A folder of
several data files (AgentBench's ``data/``) gives one row per file.

What ``agentunit-gym tasks check`` prints; see docs/tasks.md.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.task_sources import TaskSource, load_sources, problems_of, tasks_by_domain
from agentunit_gym.errors import EndpointRequiredError, NoTasksError, RunStoppedError
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.routing import env_domain
from agentunit_gym.eval.record.records import EpisodeRecord, RunPaths, read_records
from agentunit_gym.eval.run.runner import EvalConfig
from agentunit_gym.eval.run.slots import ProgressFn
from agentunit_gym.tasks.spec import NEEDS_NETWORK

_LOCATION = re.compile(r"(?::\d+|#[^#/]+)$")
"""A task's location after its file: ``:<line>`` (JSON lines), ``#<index>`` (a JSON list) or
``#<key>`` (a JSON object, e.g. WebShop's human goals by ASIN)."""


@dataclass(frozen=True)
class Failure:
    """One item that did not pass: where it is and why."""

    where: str
    """The file and line or index, or the task id."""
    reason: str
    """Short, groupable: the problem's message, ``finish: <reason>``, ``task_error: ...``."""
    detail: str = ""


@dataclass
class FileCheck:
    """The counts of one source file."""

    file: str
    domain: str
    format: str
    loaded: int = 0
    """Items that converted to tasks."""
    not_converted: list[Failure] = field(default_factory=list)
    ran: int = 0
    passed: int = 0
    failed: list[Failure] = field(default_factory=list)
    """Episodes that ran and did not pass."""
    not_run: list[Failure] = field(default_factory=list)
    """Loaded items the run left out: the backend cannot run them, or they need the network
    and the check ran without it."""

    @property
    def ok(self) -> bool:
        """Every item of the file converted, ran and passed."""
        return not self.not_converted and not self.not_run and self.passed == self.loaded

    def top_reasons(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` most frequent reasons among the items that did not pass, with counts."""
        counts = Counter(f.reason for f in [*self.not_converted, *self.not_run, *self.failed])
        return counts.most_common(n)

    def to_json(self) -> dict[str, Any]:
        def rows(items: list[Failure]) -> list[dict[str, str]]:
            return [{"where": f.where, "reason": f.reason, "detail": f.detail} for f in items]

        return {"file": self.file, "domain": self.domain, "format": self.format, "loaded": self.loaded,
                "not_converted": len(self.not_converted), "ran": self.ran, "passed": self.passed,
                "failed": len(self.failed), "not_run": len(self.not_run), "ok": self.ok,
                "top_reasons": [{"reason": r, "count": c} for r, c in self.top_reasons()],
                "problems": rows(self.not_converted), "failures": rows(self.failed),
                "not_run_items": rows(self.not_run)}


@dataclass
class TaskCheck:
    """What :func:`check_tasks` found."""

    files: list[FileCheck]
    run_dir: Path | None
    """The oracle run's folder (kept only when ``output`` was given)."""
    stopped: str | None = None
    """Why the evaluator stopped the oracle run early (most episodes failed for one
    infrastructure reason), when it did; the episodes it did not run count as not run."""
    needs_server: dict[str, str] = field(default_factory=dict)
    """Envs that ran nothing because their tasks need a server nobody named (the KG's Freebase
    endpoint), with the error that says how to give one."""

    @property
    def ok(self) -> bool:
        """Every item of every file converted, ran and passed."""
        return all(f.ok for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "run_dir": str(self.run_dir) if self.run_dir else None, "stopped": self.stopped,
                "needs_server": dict(self.needs_server), "files": [f.to_json() for f in self.files]}


def _file_of(location: str | None, fallback: Path) -> str:
    """``/x/dev.jsonl:3`` -> ``/x/dev.jsonl``; ``file#2`` and ``file#B000TEST01`` -> ``file``; None -> ``fallback``."""
    if not location:
        return str(fallback)
    return _LOCATION.sub("", location)


def _reason(record: EpisodeRecord) -> Failure:
    where = record.task_id
    if record.status != "done":
        first = record.error.strip().splitlines()[0] if record.error.strip() else ""
        return Failure(where, f"{record.status}: {first}" if first else record.status, record.error)
    reason = f"finish: {record.finish_reason or 'none'}"
    if record.finish_reason == "complete":
        reason += " (the check failed)"
    return Failure(where, reason, record.error)


def check_tasks(paths: Sequence[str | Path], *, backends: Sequence[str] = ("auto",), output: str | Path | None = None,
                concurrency: int = 4, episode_timeout_s: float = 600.0, network: bool = False,
                env_options_by_env: Mapping[str, Mapping[str, Any]] | None = None,
                progress: ProgressFn | None = None) -> TaskCheck:
    """Load ``paths`` as ``--tasks`` does, run the oracle over what converted, count per file.

    Args:
        paths: task files or folders (native, or a domain loader's format such as AgentBench's data).
        backends: backend names (``auto``, or names; each applies to the domains that declare it).
        output: keep the oracle run (``episodes.jsonl``, traces, report) in this folder; by
            default it runs in a temporary folder removed afterwards.
        concurrency: episodes in flight per env.
        episode_timeout_s: wall-clock limit of one episode.
        network: run with the network (``eval --network``); without it, items that need the
            network (``needs_network``, e.g. AgentBench items that ``apt install``) are not run
            and are listed as ``needs network (not run; pass --network)``.
        env_options_by_env: env keyword arguments by full env id (``--env-option``: the KG
            ``endpoint`` AgentBench's Freebase items need, a shop ``url``). An env that needs a
            server nobody named (:class:`~agentunit_gym.errors.EndpointRequiredError`) runs
            nothing: its items are listed as not run with the error's first sentence, and the
            other files are checked.
        progress: called after each oracle episode with the record, the episodes done and
            their total (as :func:`~agentunit_gym.eval.evaluate.evaluate` calls it).

    Returns:
        One :class:`FileCheck` per source file, in the order read.

    Raises:
        TaskFileError: a path does not exist or nothing there is a task file; ``NoTasksError``:
            no task loads from any of the paths (files that load are checked beside broken ones).
        ConfigError: two files give the same task id, or bad options (an unknown backend).
        BackendUnavailableError: the backend cannot run here.
    """
    resolved = [str(Path(p).resolve()) for p in paths]
    sources = load_sources(resolved)
    if not any(s.result.tasks for s in sources):  # nothing to check: say why, as eval does
        raise NoTasksError(resolved, [str(p) for p in problems_of(sources)])
    grouped = tasks_by_domain(sources)  # raises on a task id given twice
    files: dict[str, FileCheck] = {}
    owner: dict[tuple[str, str], FileCheck] = {}

    def file_check(source: TaskSource, location: str | None) -> FileCheck:
        name = _file_of(location, source.path)
        key = f"{source.domain.name}\0{name}"
        if key not in files:
            files[key] = FileCheck(name, source.domain.name, source.format)
        return files[key]

    for source in sources:
        for task in source.result.tasks:
            check = file_check(source, task.source)
            check.loaded += 1
            owner[(source.domain.name, task.id)] = check
        for problem in source.result.problems:
            check = file_check(source, problem.source)
            where = problem.source + (f", task {problem.task_id!r}" if problem.task_id is not None else "")
            reason = f"{problem.field}: {problem.message}" if problem.field else problem.message
            check.not_converted.append(Failure(where, reason, str(problem)))
    run_dir: Path | None = None
    stopped: str | None = None
    needs_server: dict[str, str] = {}
    if grouped:
        envs = tuple(get_domain(name).envs[0].id for name in grouped)
        config = EvalConfig(envs=envs, agent="oracle", backends=tuple(backends), tasks=tuple(resolved),
                            concurrency=concurrency, episode_timeout_s=episode_timeout_s, network=network,
                            env_options_by_env={k: dict(v) for k, v in (env_options_by_env or {}).items()})
        unreachable = _envs_needing_a_server(config)
        needs_server.update(unreachable)
        for env_id, why in unreachable.items():
            name = env_domain(env_id) or ""
            first = why.split(". ")[0].rstrip(".")
            for task in grouped.pop(name, []):
                owner[(name, task.id)].not_run.append(Failure(task.id, f"not run: {first}", why))
        config = config.model_copy(update={"envs": tuple(e for e in config.envs if e not in unreachable)})
    if grouped:
        if output is not None:
            run_dir = Path(output)
            records, stopped, left_out = _run_oracle(config, run_dir, progress)
        else:
            with tempfile.TemporaryDirectory(prefix="agentunit-check-") as tmp:
                records, stopped, left_out = _run_oracle(config, Path(tmp) / "run", progress)
        seen: set[tuple[str, str]] = set()
        for record in records:
            domain = env_domain(record.env_id) or ""
            check_of = owner.get((domain, record.task_id))
            if check_of is None:
                continue  # not one of ours (cannot happen: --tasks replaces the bundled suite)
            seen.add((domain, record.task_id))
            check_of.ran += 1
            if record.success:
                check_of.passed += 1
            else:
                check_of.failed.append(_reason(record))
        for name, tasks in grouped.items():
            for task in tasks:
                if (name, task.id) not in seen:
                    if stopped is not None:
                        reason = "not run: the oracle run stopped early"
                        owner[(name, task.id)].not_run.append(Failure(task.id, reason, stopped))
                        continue
                    if task.needs_network and not network:
                        owner[(name, task.id)].not_run.append(Failure(task.id, NEEDS_NETWORK, task.network_note or ""))
                        continue
                    note = task.backend_note or f"runs only on {', '.join(task.backends or ())}"
                    # The env's own reason when it gave one (a domain's refusal), else the backends'.
                    why = left_out.get((name, task.id), f"not run on {','.join(backends)}: {note}")
                    owner[(name, task.id)].not_run.append(Failure(task.id, why))
    return TaskCheck(list(files.values()), run_dir, stopped, needs_server)


def _envs_needing_a_server(config: EvalConfig) -> dict[str, str]:
    """The envs of ``config`` that cannot start because their tasks need a server the user must
    name and none was given, with the first sentence of why (each env is made once and closed)."""
    from agentunit_gym.eval.plan.routing import default_env_factory
    from agentunit_gym.eval.run.runner import env_options

    found: dict[str, str] = {}
    for env_id in config.envs:
        try:
            default_env_factory(env_id, env_options(config, env_id)).close()
        except EndpointRequiredError as exc:
            found[env_id] = str(exc)
    return found


def _run_oracle(config: EvalConfig, run_dir: Path, progress: ProgressFn | None = None,
                ) -> tuple[list[EpisodeRecord], str | None, dict[tuple[str, str], str]]:
    """The oracle's episodes in ``run_dir``, why the run stopped early when it did, and the
    reason of each task its env left out, by ``(domain, task id)``."""
    stopped: str | None = None
    try:
        evaluate(config, run_dir, progress=progress)
    except RunStoppedError as exc:  # the episodes that finished are saved: report them
        stopped = str(exc)
    paths = RunPaths(run_dir)
    left_out: dict[tuple[str, str], str] = {}
    if paths.left_out.exists():
        for item in json.loads(paths.left_out.read_text(encoding="utf-8")):
            left_out.setdefault((env_domain(item["env"]) or "", item["task"]), item["reason"])
    return read_records(paths.episodes), stopped, left_out


__all__ = ["FileCheck", "Failure", "TaskCheck", "check_tasks"]
