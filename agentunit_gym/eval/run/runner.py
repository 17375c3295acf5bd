"""The evaluator's main loop: agents over tasks x repeats, with resume.

How a run goes:

1. :func:`~agentunit_gym.eval.plan.work.plan` lists the work: for each env id, its tasks
   (filtered by id and category, sampled down to ``n`` with a seeded draw), times ``runs``
   repeats. Each work item has a seed derived from the run seed, the env, the task and the
   repeat, so an episode gets the same seed whether it runs first, last, or after a resume.
2. Per env id, ``concurrency`` copies of the standard stack are made, each under
   :class:`~agentunit_gym.eval.run.schedule.ScheduleEpisodes`, the wrapper through which the
   runner says which task a copy runs next and ends an episode from outside. The env that
   listed the tasks for the plan is the first copy (except with ``--vector async``, whose
   copies live in their own processes).
3. The episode engine (:mod:`agentunit_gym.eval.run.engine`) runs the episodes on the copies,
   each stepping as soon as its own agent replies. ``vector`` chooses where the copies
   live (:mod:`agentunit_gym.eval.run.copies`): in this process (the default), or each in a
   one-env gymnasium vector env, ``SyncVectorEnv`` here or ``AsyncVectorEnv`` in a process
   of its own.
4. Each finished episode is written at once (:mod:`agentunit_gym.eval.record.records`): its trace
   to ``traces/``, one JSON line to ``episodes.jsonl`` (flushed), so an interrupted run
   resumes where it stopped.

Infrastructure failures (:class:`~agentunit_gym.errors.BackendError` and the other
backend errors) are retried up to ``max_infra_retries`` times on a fresh reset; an agent
that raises or stops answering is never retried: its episode is recorded as it ended. An
agent whose model refuses the conversation as too long for its context window
(:class:`~agentunit_gym.errors.AgentContextLimitError`) has its episode ended as CLE, not
as an agent error.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym

from agentunit_gym.eval.agents.builtin import AgentFactory
from agentunit_gym.eval.plan.config import EvalConfig, VectorMode
from agentunit_gym.eval.plan.routing import (
    EnvFactory,
    backend_for,
    default_env_factory,
    env_domain,
    full_env_id,
    network_options,
    task_options,
)
from agentunit_gym.eval.plan.work import (
    LeftOut,
    WorkItem,
    episode_seed,
    left_out_tasks,
    list_tasks,
    plan,
    selected_left_out,
    warn_left_out,
)
from agentunit_gym.eval.record.records import (
    EpisodeRecord,
    RecordWriter,
    RunPaths,
    check_run_dir,
    iter_records,
    load_trace,
    read_records,
    trace_filename,
)
from agentunit_gym.eval.run.copies import copy_maker, head_copy
from agentunit_gym.eval.run.deadlines import episode_call_timeout
from agentunit_gym.eval.run.engine import run_async
from agentunit_gym.eval.run.schedule import INFRA_ERRORS
from agentunit_gym.eval.run.slots import ProgressFn, RecordSink


@dataclass
class RunOutcome:
    """What :func:`run_episodes` did."""

    records: list[EpisodeRecord]
    skipped: int
    """Episodes already done before (resume)."""
    elapsed_s: float
    setup_s: float = 0.0
    """Of ``elapsed_s``, the time spent making envs (the probe per env id, which is also its
    first copy, and the other copies)."""
    left_out: list[LeftOut] = field(default_factory=list)
    """Tasks of the run (after its filters) that its envs cannot run here, with the reason;
    also written to ``left_out.json``."""


class RemoteEpisodes(Protocol):
    """Runs a run's episodes somewhere else than this process (a Ray cluster:
    :class:`agentunit_gym.eval.run.cluster.RayEpisodes`); this process still plans the run and
    writes every record."""

    def start(self, config: EvalConfig, agent_factory: AgentFactory, agent_label: str,
              env_factory: EnvFactory) -> None:
        """Get ready to run episodes of ``config`` (make the workers)."""

    def list_tasks(self, env_id: str) -> tuple[list[tuple[str, str]], list[LeftOut], str | None]:
        """``(task_id, category)`` of every task ``env_id`` can run on its backend there, the
        tasks it leaves out with the reasons, and those in one line (None when nothing)."""

    def run(self, items: list[WorkItem], sink: RecordSink) -> float:
        """Run ``items``, recording each finished episode exactly once through ``sink``; the
        seconds spent making envs."""

    def close(self) -> None:
        """Release the workers (idempotent)."""


def run_episodes(
    config: EvalConfig,
    agent_factory: AgentFactory,
    agent_label: str,
    run_dir: Path,
    *,
    env_factory: EnvFactory = default_env_factory,
    resume: bool = False,
    progress: ProgressFn | None = None,
    remote: RemoteEpisodes | None = None,
) -> RunOutcome:
    """Run every planned episode that is not done yet, writing each as it finishes.

    Args:
        config: the run.
        agent_factory: makes one agent per concurrent slot.
        agent_label: the agent's name in records and reports.
        run_dir: the run directory (created).
        env_factory: makes an env for an env id and options.
        resume: continue the run in ``run_dir``; without it, ``run_dir`` must not hold episodes.
        progress: called after each episode.
        remote: run the episodes there (a Ray cluster) instead of in this process; records
            and traces are still written here. Closed at the end.

    Returns:
        The records written by this call, how many were skipped, the elapsed time.

    Raises:
        ConfigError: ``run_dir`` holds another run (resume with a different config), or
            holds episodes and ``resume`` is False.
    """
    started = time.perf_counter()
    paths = RunPaths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_dir(paths, config, resume)
    previous = read_records(paths.episodes) if resume else []
    # Episodes that failed on infrastructure or in the agent (an endpoint that was down) run
    # again; finished episodes and task errors (the task itself cannot run here) do not.
    done = {r.key for r in previous if r.status not in ("infra_error", "agent_error", "endpoint_error")}
    writer = RecordWriter(paths)
    setup_s = 0.0
    # The env that lists an env id's tasks (the probe) then runs them, as the first copy:
    # one env construction per env id less (on mysql, a server start and stop).
    probes: dict[str, gym.Env[str, str]] = {}
    sink: RecordSink | None = None
    try:
        envs = [full_env_id(e) for e in config.envs]
        if remote is not None:
            return _run_remote(config, agent_factory, agent_label, env_factory, remote, envs, done, writer,
                               progress, started)
        tasks_by_env: dict[str, list[tuple[str, str]]] = {}
        everything_left_out: list[LeftOut] = []
        for env_id in envs:
            probe_started = time.perf_counter()
            probes[env_id] = env_factory(env_id, env_options(config, env_id))
            setup_s += time.perf_counter() - probe_started
            tasks_by_env[env_id] = list_tasks(probes[env_id])
            everything_left_out += left_out_tasks(env_id, probes[env_id])
            warn_left_out(env_id, probes[env_id])
        items = plan(config, tasks_by_env, everything_left_out)
        left_out = selected_left_out(config, everything_left_out)
        paths.left_out.write_text(json.dumps([lo.to_json() for lo in left_out], indent=2), encoding="utf-8")
        todo = [it for it in items if it.key not in done]
        sink = RecordSink(writer, len(items) - len(todo), len(items), progress)
        for env_id in envs:
            mine = [it for it in todo if it.env_id == env_id]
            probe = probes.pop(env_id)
            if mine:
                setup_s += _run_env(config, env_id, mine, agent_factory, agent_label, env_factory, sink, probe)
            else:
                probe.close()
    finally:
        for probe in probes.values():  # an error left them unused
            probe.close()
        writer.close()
        if remote is not None:
            remote.close()
    return RunOutcome(sink.written if sink else [], len(done), time.perf_counter() - started, setup_s, left_out)


def _run_remote(config: EvalConfig, agent_factory: AgentFactory, agent_label: str, env_factory: EnvFactory,
                remote: RemoteEpisodes, envs: list[str], done: set[str], writer: RecordWriter,
                progress: ProgressFn | None, started: float) -> RunOutcome:
    """:func:`run_episodes` with the tasks listed and the episodes run by ``remote``."""
    remote.start(config, agent_factory, agent_label, env_factory)
    tasks_by_env: dict[str, list[tuple[str, str]]] = {}
    everything_left_out: list[LeftOut] = []
    for env_id in envs:
        tasks_by_env[env_id], env_left_out, note = remote.list_tasks(env_id)
        everything_left_out += env_left_out
        warn_left_out(env_id, None, note)
    items = plan(config, tasks_by_env, everything_left_out)
    left_out = selected_left_out(config, everything_left_out)
    writer.paths.left_out.write_text(json.dumps([lo.to_json() for lo in left_out], indent=2), encoding="utf-8")
    todo = [it for it in items if it.key not in done]
    sink = RecordSink(writer, len(items) - len(todo), len(items), progress)
    setup_s = remote.run(todo, sink) if todo else 0.0
    return RunOutcome(sink.written, len(done), time.perf_counter() - started, setup_s, left_out)


def _run_env(config: EvalConfig, env_id: str, items: list[WorkItem], agent_factory: AgentFactory,
             agent_label: str, env_factory: EnvFactory, sink: RecordSink, probe: gym.Env[str, str]) -> float:
    """Run ``items`` of ``env_id``, whose first copy is ``probe`` (closed here); the setup seconds."""
    options = env_options(config, env_id)
    call_timeout_s = episode_call_timeout(config.episode_timeout_s)
    head = head_copy(config.vector, probe, env_id, call_timeout_s)
    make_copy = copy_maker(config.vector, lambda: env_factory(env_id, dict(options)), env_id, call_timeout_s)
    return run_async(config, items, agent_factory, agent_label, make_copy, head, sink)


def env_options(config: EvalConfig, env_id: str) -> dict[str, Any]:
    """The keyword arguments of ``make_eval_env`` for ``env_id`` in this run (backend, limits,
    traps, the protocol, extras). The protocol's settings are applied there, in one place
    (:func:`~agentunit_gym.wrappers.protocols.protocol_setup`); this run's own options win."""
    options: dict[str, Any] = {"backend": backend_for(env_id, config.backends), **config.env_options,
                               **config.env_options_by_env.get(env_id, {})}
    options.update(task_options(env_id, config.tasks))
    options.update(network_options(env_id, config.network))
    options["max_seconds"] = config.episode_timeout_s
    options["invalid_policy"] = config.invalid_action  # an explicit continue holds under a protocol too
    if config.protocol != "agentunit":
        options["protocol"] = config.protocol
        if config.agentbench_root is not None:
            options["agentbench_root"] = config.agentbench_root
    if config.trap_rate is not None:
        options["trap_rate"] = config.trap_rate
    if config.full_text:
        options["trace_max_chars"] = None
    return options


__all__ = [
    "INFRA_ERRORS", "EnvFactory", "EpisodeRecord", "EvalConfig", "LeftOut",
    "ProgressFn", "RemoteEpisodes", "RunOutcome", "RunPaths", "VectorMode", "WorkItem", "backend_for",
    "default_env_factory", "env_domain", "env_options", "episode_seed", "full_env_id", "iter_records", "list_tasks",
    "load_trace", "plan", "read_records", "run_episodes", "trace_filename",
]
