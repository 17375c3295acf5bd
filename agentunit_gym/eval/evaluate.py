"""The standard evaluation in one call: run the episodes, summarize, write the report.

``agentunit-gym eval`` is a thin layer over :func:`evaluate`; Python users call it the same way::

    from agentunit_gym.eval.evaluate import evaluate
    from agentunit_gym.eval.runner import EvalConfig

    result = evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="oracle"))
    print(result.summary["overall"]["metrics"]["success_rate"]["value"])
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.errors import ConfigError, RunStoppedError
from agentunit_gym.eval.agents import AgentFactory, resolve_agent
from agentunit_gym.eval.report import write_report
from agentunit_gym.eval.routing import check_task_paths
from agentunit_gym.eval.runner import (
    EnvFactory,
    EvalConfig,
    ProgressFn,
    RemoteEpisodes,
    RunOutcome,
    default_env_factory,
    run_episodes,
)
from agentunit_gym.eval.summary import summarize

DEFAULT_RESULTS = Path("results")

RunStopped = RunStoppedError

_MADE_HERE: set[Path] = set()
"""Run folders :func:`default_run_dir` made in this process (removed again if a run is refused)."""

LOCK_FILE = ".lock"
"""Held (``flock``) by the eval writing a run folder; a second eval on the folder is refused."""


@dataclass
class EvalResult:
    """What a run produced."""

    run_dir: Path
    outcome: RunOutcome
    summary: dict[str, Any]
    report: Path


def default_run_dir(config: EvalConfig, root: Path = DEFAULT_RESULTS) -> Path:
    """A new folder ``results/<UTC time>-<agent>``, created here: sortable, says what ran, and
    unique (a second eval started in the same second gets ``-2``, ``-3`` ...; the folder is
    made with an exclusive ``mkdir``, so two processes never share one)."""
    agent = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.agent)[:40]
    stem = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{agent}"
    root.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = root / (stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        _MADE_HERE.add(candidate)
        return candidate
    raise ConfigError(f"could not make a new run folder under {root} (1000 runs named {stem}).")


def latest_run_dir(root: Path = DEFAULT_RESULTS) -> Path:
    """The most recently started run under ``root`` (for ``--resume`` without ``--output``).

    Raises:
        ConfigError: no run there.
    """
    runs = [p for p in root.glob("*") if (p / "config.json").exists()] if root.exists() else []
    if not runs:
        raise ConfigError(f"--resume without --output needs a run under {root}/, and there is none.")
    return max(runs, key=lambda p: ((p / "config.json").stat().st_mtime, p.name))


def stored_config(run_dir: str | Path) -> EvalConfig | None:
    """The configuration stored in ``run_dir/config.json``; None when there is none.

    Raises:
        ConfigError: a config.json that does not read.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return None
    try:
        return EvalConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} does not read as a run's configuration: {exc}") from exc


def prepare_run_dir(config: EvalConfig, output: str | Path | None, *, resume: bool = False) -> Path:
    """The run folder: ``output`` (the latest run with ``resume``), else a new unique one.

    Raises:
        ConfigError: ``output`` is a file, or ``resume`` finds no run.
    """
    if output is None:
        return latest_run_dir() if resume else default_run_dir(config)
    path = Path(output)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output {path} is a file; give a folder for the run (it is created if missing).")
    return path


@contextlib.contextmanager
def lock_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's lock for the duration, so two evals never write one folder.

    Raises:
        ConfigError: another process holds it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the lock's duration
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ConfigError(f"{run_dir} is in use by another eval (pid {holder}); wait for it, or give "
                              "another --output.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # closing releases the lock


_OUR_FILES = ("config.json", "episodes.jsonl", "left_out.json", LOCK_FILE)


def _remove_if_unused(run_dir: Path) -> None:
    """Remove what this call made in ``run_dir`` when no episode was written (a run refused at
    the start leaves no empty results folder); anything else there stays."""
    episodes = run_dir / "episodes.jsonl"
    if episodes.exists() and episodes.stat().st_size > 0:
        return
    for name in _OUR_FILES:
        with contextlib.suppress(OSError):
            (run_dir / name).unlink()
    for folder in (run_dir / "traces", run_dir):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty


def evaluate(
    config: EvalConfig,
    output: str | Path | None = None,
    *,
    resume: bool = False,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    agent_options: dict[str, Any] | None = None,
    agent_factory: AgentFactory | None = None,
    env_factory: EnvFactory = default_env_factory,
    progress: ProgressFn | None = None,
    check_endpoint: bool = True,
    remote: RemoteEpisodes | None = None,
) -> EvalResult:
    """Run ``config`` and write ``episodes.jsonl``, ``traces/``, ``summary.json`` and ``report.html``.

    Args:
        config: what to run.
        output: the run directory (a str or a Path); default a new one under ``results/`` (the
            latest one with ``resume``). A run refused before its first episode leaves no folder behind.
        resume: continue the run in ``output``, running only the episodes it lacks.
        base_url: the OpenAI-compatible endpoint for ``openai:`` agents.
        api_key_env: the environment variable with the key.
        agent_options: extra options for the agent (e.g. ``{"mode": "tools"}`` for ``openai:``).
        agent_factory: use this instead of resolving ``config.agent`` (labels stay ``config.agent``).
        env_factory: makes the env stack (default: ``make_eval_env``).
        progress: called after each episode.
        check_endpoint: for ``openai:`` agents, send one cheap request to the endpoint before
            the first episode and fail at once when it does not answer.
        remote: run the episodes there instead of in this process (``--ray``:
            :func:`agentunit_gym.eval.cluster.connect_cluster`); the records are written here as usual.

    Returns:
        The run directory, what ran, the summary and the report path.

    Raises:
        ConfigError: bad options, or a run directory that holds another run.
        NoTasksError: no task loads from a path of ``config.tasks`` (the bundled suite is not run instead).
        BackendUnavailableError: a backend asked for cannot run here.
        EndpointError: the model endpoint does not answer (``check_endpoint``).
        RunStoppedError: most episodes failed for one infrastructure reason; the run stopped early.
    """
    # Before any folder exists: task paths the run would not use, a wrong agent or a dead endpoint leave nothing.
    check_task_paths(config.tasks, config.envs)
    if agent_factory is None:
        label, agent_factory = resolve_agent(config.agent, base_url=base_url, api_key_env=api_key_env,
                                             check_endpoint=check_endpoint, **(agent_options or {}))
    else:
        label = config.agent
    run_dir = prepare_run_dir(config, output, resume=resume)
    # Ours to remove when the run is refused before its first episode: a folder made for it.
    fresh = not resume and (run_dir in _MADE_HERE or not run_dir.exists())
    try:
        with lock_run_dir(run_dir):
            outcome = run_episodes(config, agent_factory, label, run_dir, env_factory=env_factory, resume=resume,
                                   progress=progress, remote=remote)
    except RunStoppedError:
        # The episodes finished before the stop are worth reading: summary and report of them.
        summarize(run_dir, seed=config.seed)
        write_report(run_dir)
        raise
    except Exception:  # an interrupt keeps the folder: its message tells how to resume it
        if fresh:
            _remove_if_unused(run_dir)
        raise
    summary = summarize(run_dir, seed=config.seed)
    report = write_report(run_dir)
    return EvalResult(run_dir, outcome, summary, report)
