"""The standard evaluation in one call: plan, run, record, report.

``agentunit-gym eval`` is a thin layer over :func:`evaluate`; Python users call it the same way::

    from agentunit_gym.eval.evaluate import evaluate
    from agentunit_gym.eval.plan.config import EvalConfig

    result = evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="oracle"))
    print(result.summary["overall"]["metrics"]["success_rate"]["value"])

The stages are the sub-packages of :mod:`agentunit_gym.eval`, each importing only those below it:
``agents`` (what is driven), ``plan`` (what the run is), ``record`` (what it leaves on disk),
``run`` (the episode engine), ``judge`` and ``report`` (what the records mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.errors import RunStoppedError
from agentunit_gym.eval.agents.builtin import AgentFactory, resolve_agent
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import EnvFactory, check_task_paths, default_env_factory
from agentunit_gym.eval.record.run_dir import lock_run_dir, made_here, prepare_run_dir, remove_if_unused
from agentunit_gym.eval.report.html import write_report
from agentunit_gym.eval.report.summary import summarize
from agentunit_gym.eval.run.runner import RemoteEpisodes, RunOutcome, run_episodes
from agentunit_gym.eval.run.slots import ProgressFn

RunStopped = RunStoppedError


@dataclass
class EvalResult:
    """What a run produced."""

    run_dir: Path
    outcome: RunOutcome
    summary: dict[str, Any]
    report: Path


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
            :func:`agentunit_gym.eval.run.cluster.connect_cluster`); the records are written here as usual.

    Returns:
        The run directory, what ran, the summary and the report path.

    Raises:
        ConfigError: bad options, or a run directory that holds another run.
        NoTasksError: no task loads from a path of ``config.tasks`` (the bundled suite is not run instead).
        BackendUnavailableError: a backend asked for cannot run here.
        EndpointError: the model endpoint does not answer (``check_endpoint``).
        RunStoppedError: most episodes failed for one infrastructure reason; the run stopped early.
    """
    # Plan: before any folder exists, task paths the run would not use, a wrong agent or a dead
    # endpoint leave nothing behind.
    check_task_paths(config.tasks, config.envs)
    if agent_factory is None:
        label, agent_factory = resolve_agent(config.agent, base_url=base_url, api_key_env=api_key_env,
                                             check_endpoint=check_endpoint, **(agent_options or {}))
    else:
        label = config.agent
    # Record: the run folder; ours to remove when the run is refused before its first episode.
    run_dir = prepare_run_dir(config, output, resume=resume)
    fresh = not resume and (made_here(run_dir) or not run_dir.exists())
    # Run: every planned episode not done yet, each written as it finishes.
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
            remove_if_unused(run_dir)
        raise
    # Report: what the records mean.
    return EvalResult(run_dir, outcome, summarize(run_dir, seed=config.seed), write_report(run_dir))


__all__ = ["EvalResult", "RunStopped", "evaluate"]
