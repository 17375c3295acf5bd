"""The evaluator: agents over tasks x repeats on gymnasium vector envs, with resume.

How a run goes:

1. :func:`plan` lists the work: for each env id, its tasks (filtered by id and category,
   sampled down to ``n`` with a seeded draw), times ``runs`` repeats. Each work item has a
   seed derived from the run seed, the env, the task and the repeat, so an episode gets
   the same seed whether it runs first, last, or after a resume.
2. Per env id, a vector env of ``concurrency`` copies of the standard stack is made, each
   copy under :class:`ScheduleEpisodes`, the wrapper that lets the runner say which task
   each copy runs next. The env that listed the tasks for :func:`plan` is the first copy
   (except with ``async``, whose copies live in their own processes). The vector env uses
   gymnasium's ``AutoresetMode.DISABLED``: the runner resets exactly the copies that
   finished, with their next task, through ``reset(options={"reset_mask": ...})``; copies
   with no work left idle.
3. Each turn, the agents (one per copy, made by the agent factory) act in a thread pool,
   so model calls overlap; then one ``step`` of the vector env runs every copy's action.
4. Each finished episode is written at once: its trace to ``traces/``, one JSON line to
   ``episodes.jsonl`` (flushed), so an interrupted run resumes where it stopped.

Infrastructure failures (:class:`~agentunit_gym.errors.BackendError` and the other
backend errors) are retried up to ``max_infra_retries`` times on a fresh reset; an agent
that raises or stops answering is never retried: its episode is recorded as it ended. An
agent whose model refuses the conversation as too long for its context window
(:class:`~agentunit_gym.errors.AgentContextLimitError`) has its episode ended as CLE, not
as an agent error.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, iterate
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.score import Score
from agentunit_gym.core.trace import AgentReply, EpisodeTrace, Flag, StepRecord, Usage
from agentunit_gym.errors import (
    AgentContextLimitError,
    AgentUnitError,
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
)
from agentunit_gym.eval.agents import REFERENCE_KEY, Agent, AgentFactory, needs_reference, reset_agent

INFRA_ERRORS: tuple[type[BaseException], ...] = (BackendError, BackendTimeoutError, BackendUnavailableError)
"""Errors that are the infrastructure's fault: the episode is retried."""

EnvFactory = Callable[[str, dict[str, Any]], gym.Env[str, str]]
"""Makes one env (the standard stack) for an env id and options."""

VectorMode = Literal["sync", "threads", "async"]

DEFAULT_VECTOR_MODE: VectorMode = "threads"
"""Measured in docs/performance.md ("Evaluator"): copies stepped in a thread pool beat both
gymnasium's SyncVectorEnv (copies one after another) and AsyncVectorEnv (a process per
copy: pickling, pipes, and a backend start per process) on these I/O-bound envs."""

OBSERVATION_CAP = 4000
"""Characters of each observation and reply kept in a trace the runner builds itself."""


class EvalConfig(BaseModel):
    """Everything that defines a run (written to ``config.json``; a resume must match it)."""

    model_config = ConfigDict(frozen=True)

    envs: tuple[str, ...] = ("AgentUnit/OS-v0",)
    """Env ids (``OS-v0`` is short for ``AgentUnit/OS-v0``)."""
    agent: str = "oracle"
    """``oracle``, ``random``, ``openai:<model>`` or ``module:attr``."""
    backends: tuple[str, ...] = ("auto",)
    """Backends; each applies to the env kinds it belongs to (docker/local: OS, mysql/sqlite: DB)."""
    n: int | None = Field(default=None, ge=1)
    """Tasks sampled per env (seeded); None for all."""
    runs: int = Field(default=1, ge=1)
    """Repeats per task."""
    concurrency: int = Field(default=4, ge=1)
    """Episodes in flight per env."""
    task_ids: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    trap_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int = 0
    episode_timeout_s: float = Field(default=600.0, gt=0)
    """Wall-clock limit of one episode, agent time included."""
    max_infra_retries: int = Field(default=2, ge=0)
    vector: VectorMode = DEFAULT_VECTOR_MODE
    env_options: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for every env (e.g. ``max_steps``)."""

    @field_validator("envs")
    @classmethod
    def _full_ids(cls, envs: tuple[str, ...]) -> tuple[str, ...]:
        # One spelling per env, so a resume with ``OS-v0`` matches a run made with ``AgentUnit/OS-v0``.
        return tuple(full_env_id(e) for e in envs)

    def resume_key(self) -> dict[str, Any]:
        """The fields a resumed run must share with the original (not concurrency or retries)."""
        return self.model_dump(include={"envs", "agent", "backends", "n", "runs", "task_ids", "categories",
                                        "trap_rate", "seed", "env_options"})


@dataclass(frozen=True)
class WorkItem:
    """One episode to run."""

    env_id: str
    task_id: str
    run: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.env_id}|{self.task_id}|{self.run}"


def full_env_id(env_id: str) -> str:
    """``OS-v0`` -> ``AgentUnit/OS-v0``; full ids pass through."""
    return env_id if "/" in env_id else f"AgentUnit/{env_id}"


def env_domain(env_id: str) -> str | None:
    from agentunit_gym.envs.registry import ENVS

    for entry in ENVS:
        if entry.id == env_id:
            return entry.domain
    return None


def backend_for(env_id: str, backends: Sequence[str]) -> str:
    """The backend of ``env_id`` among ``backends``: the one of its kind, else ``auto``.

    Raises:
        ConfigError: an unknown backend name, or two backends of one kind.
    """
    from agentunit_gym.core import registry

    kinds = {d.name: d.backend_names for d in registry.domains()}
    known = {"auto", *(name for names in kinds.values() for name in names)}
    for b in backends:
        if b not in known:
            raise ConfigError(f"unknown backend {b!r}: use {', '.join(sorted(known))}.")
    kind = kinds.get(env_domain(env_id) or "", ())
    mine = [b for b in backends if b in kind]
    if len(mine) > 1:
        raise ConfigError(f"two backends for {env_id}: {mine}; give one.")
    return mine[0] if mine else "auto"


def episode_seed(base: int, env_id: str, task_id: str, run: int) -> int:
    """A seed that depends only on what the episode is, not on when it runs."""
    return zlib.crc32(f"{base}|{env_id}|{task_id}|{run}".encode()) & 0x7FFFFFFF


def default_env_factory(env_id: str, options: dict[str, Any]) -> gym.Env[str, str]:
    """The standard evaluation stack (``make_eval_env``); the bare env if the stack is missing.

    ``options`` may hold ``max_seconds`` and ``trap_rate`` (for the stack) and env keyword
    arguments such as ``backend``.
    """
    try:
        from agentunit_gym.wrappers.stack import make_eval_env
    except ImportError:
        bare = {k: v for k, v in options.items() if k not in ("max_seconds", "trap_rate")}
        return gym.make(env_id, **bare)
    stack_options = {k: v for k, v in options.items() if not (k == "trap_rate" and v is None)}
    return make_eval_env(env_id, **stack_options)


# ----------------------------------------------------------------- the schedule wrapper


@dataclass
class Packet:
    """What one copy reports to the runner after a reset or a step (opaque to gymnasium's
    info batching, which would otherwise split nested dicts into arrays)."""

    kind: Literal["reset", "step", "idle", "infra_error"]
    info: dict[str, Any] = field(default_factory=dict)
    trace: EpisodeTrace | None = None
    error: str = ""


ABORT_PREFIX = "\x00agentunit-abort:"
"""An action starting with this is the runner ending an episode (agent failure, deadline):
``ABORT_PREFIX + "<finish reason value>:<detail>"``. No agent can send a NUL through a
chat API, so it cannot collide with a real reply."""


class ScheduleEpisodes(gym.Wrapper[str, str, str, str]):
    """Runs the episode the runner assigns, reports it as one :class:`Packet`, and never lets
    an infrastructure error escape into the vector env (which would stop every copy).

    Set ``assignment`` (via ``VectorEnv.set_attr``) before a masked reset:
    ``{"task_id", "seed", "key", "reference", "deadline"}``, or None to idle. The trace
    comes from ``info["trace"]`` when the stack records one, else this wrapper builds one.

    Example::

        env = ScheduleEpisodes(make_eval_env("AgentUnit/DB-v0", backend="sqlite"))
        env.assignment = {"task_id": "db-001", "seed": 1, "key": "k", "reference": False, "deadline": None}
        obs, info = env.reset()
    """

    def __init__(self, env: gym.Env[str, str], env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.assignment: dict[str, Any] | None = None
        self._current: dict[str, Any] | None = None
        self._reset_info: dict[str, Any] = {}
        self._steps: list[StepRecord] = []
        self._started = 0.0
        self._prompt = ""
        # A stack with its own wall-clock limit (LimitEpisode) ends late steps itself.
        self._stack_has_clock = _has_wall_clock_limit(env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._current = self.assignment
        self._steps = []
        if self._current is None:
            return "", {"packet": Packet("idle")}
        self._started = time.time()
        try:
            obs, info = self.env.reset(seed=self._current["seed"], options={"task_id": self._current["task_id"]})
            if self._current.get("reference"):
                base = self.env.unwrapped
                task = base.task  # type: ignore[attr-defined]
                info[REFERENCE_KEY] = [base.render_action(s) for s in task.reference_solution]  # type: ignore[attr-defined]
        except INFRA_ERRORS as exc:
            self._current = None
            return "", {"packet": Packet("infra_error", error=f"{type(exc).__name__}: {exc}")}
        info["seed"] = self._current["seed"]
        self._reset_info = info
        self._prompt = obs
        return obs, {"packet": Packet("reset", info=info)}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._current is None:
            return "", 0.0, False, False, {"packet": Packet("idle")}
        deadline = self._current.get("deadline")
        if isinstance(action, str) and action.startswith(ABORT_PREFIX):
            reason, _, detail = action[len(ABORT_PREFIX):].partition(":")
            return self._abort(FinishReason(reason), detail)
        if deadline is not None and not self._stack_has_clock and time.time() > deadline:
            return self._abort(FinishReason.TASK_LIMIT, "wall-clock limit reached")
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except INFRA_ERRORS as exc:
            self._current = None
            return "", 0.0, True, False, {"packet": Packet("infra_error", error=f"{type(exc).__name__}: {exc}")}
        self._steps.append(_step_record(len(self._steps) + 1, action, obs, float(reward), info))
        trace = None
        if terminated or truncated:
            trace = info.get("trace")
            if not isinstance(trace, EpisodeTrace):
                trace = self._build_trace(info.get("finish_reason"), info.get("score"),
                                          str(info.get("finish_detail", "")))
        return obs, reward, terminated, truncated, {"packet": Packet("step", info=info, trace=trace)}

    def _abort(self, reason: FinishReason, detail: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        from agentunit_gym.wrappers.ending import end_episode

        base = self.env.unwrapped
        end: dict[str, Any] = {}
        if getattr(base, "finish_reason", None) is None and reason is not FinishReason.COMPLETE:
            try:
                # Through the stack, so the trap verdict, the context count and the stack's
                # own trace (RecordTrace) record this end as they would an end in step.
                end = end_episode(self.env, reason, detail=detail)
            except AgentUnitError as exc:
                detail = f"{detail}; ending the episode failed: {exc}"
        trace = end.get("trace")
        if not isinstance(trace, EpisodeTrace):  # a custom stack without RecordTrace
            trace = self._build_trace(reason, end.get("score"), detail)
        info = {**end, "finish_reason": reason, "finish_detail": detail, "score": end.get("score"), "aborted": True}
        return "", 0.0, False, True, {"packet": Packet("step", info=info, trace=trace)}

    def _build_trace(self, reason: Any, score: Any, detail: str) -> EpisodeTrace:
        info = self._reset_info
        assert self._current is not None
        return EpisodeTrace(
            episode_id=str(self._current["key"]), env_id=self.env_id, domain=str(info.get("domain", "")),
            backend=str(info.get("backend", "")), task_id=str(info.get("task_id", self._current["task_id"])),
            category=str(info.get("category", "general")), seed=self._current["seed"],
            instruction=str(info.get("instruction", "")), prompt=self._prompt[:OBSERVATION_CAP],
            optimal_steps=int(info.get("optimal_steps") or 1), max_steps=info.get("max_steps"),
            started_at=self._started, ended_at=time.time(), steps=list(self._steps),
            finish_reason=FinishReason(reason) if reason is not None else FinishReason.ERROR,
            finish_detail=detail, score=Score.model_validate(score) if score else None,
            metadata={"trace_source": "runner"},
        )


def _has_wall_clock_limit(env: gym.Env[Any, Any]) -> bool:
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if getattr(current, "max_seconds", None) is not None:
            return True
        current = current.env
    return False


def _step_record(index: int, action: str, obs: str, reward: float, info: dict[str, Any]) -> StepRecord:
    from agentunit_gym.wrappers.info import derive_flags, jsonable

    flags = list(info.get("flags") or []) or derive_flags(info)
    timing = info.get("timing")
    usage = action.usage if isinstance(action, AgentReply) and action.usage is not None else Usage()
    return StepRecord(
        index=index, timestamp=time.time(), raw_action=str(action)[:OBSERVATION_CAP],
        action=jsonable(info.get("action")) if info.get("action") else None,
        action_error=jsonable(info.get("action_error")) if info.get("action_error") else None,
        thought=str(info.get("thought") or ""), observation=obs[:OBSERVATION_CAP], observation_chars=len(obs),
        execution=jsonable(info.get("execution") or {}), execution_error=bool(info.get("execution_error")),
        reward=reward, env_latency_s=float(getattr(timing, "env_s", 0.0) or 0.0), usage=usage,
        flags=tuple(Flag(f) for f in dict.fromkeys(flags)),
    )


# ----------------------------------------------------------------------- records


class EpisodeRecord(BaseModel):
    """One line of ``episodes.jsonl``."""

    model_config = ConfigDict(frozen=True)

    key: str
    env_id: str
    task_id: str
    run: int
    seed: int
    agent: str
    status: Literal["done", "agent_error", "infra_error"]
    """``done``: the episode ended in the env (also when the agent's model ran out of
    context: finish reason ``context_limit``); ``agent_error``: the agent raised (counted as
    a failure, never retried); ``infra_error``: retries spent (re-run by ``--resume``)."""
    attempts: int = 1
    success: bool = False
    reward: float = 0.0
    finish_reason: str | None = None
    steps: int = 0
    wall_s: float = 0.0
    trace: str | None = None
    """The trace file, relative to the run directory."""
    error: str = ""


@dataclass
class RunPaths:
    """Where a run's files go."""

    root: Path

    @property
    def episodes(self) -> Path:
        return self.root / "episodes.jsonl"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"


def read_records(path: Path) -> list[EpisodeRecord]:
    """The records of ``episodes.jsonl``, the last one per key; a torn last line (the run was
    killed while writing it) is skipped."""
    if not path.exists():
        return []
    latest: dict[str, EpisodeRecord] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValueError:
            continue
        latest[record.key] = record
    return list(latest.values())


def load_trace(run_dir: Path, record: EpisodeRecord) -> EpisodeTrace | None:
    if record.trace is None:
        return None
    path = run_dir / record.trace
    if not path.exists():
        return None
    return EpisodeTrace.model_validate_json(path.read_text(encoding="utf-8"))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def trace_filename(key: str) -> str:
    return _UNSAFE.sub("_", key.replace("AgentUnit/", "")) + ".json"


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


class RecordWriter:
    """Appends records and traces; every record is flushed to the OS before the next episode.

    Flushed, not fsynced: a killed process loses nothing that was flushed (the kernel holds
    it), while an fsync per episode was measured at ~4 ms here (it commits the new trace
    file's metadata too), more than a whole SQLite episode. After a power loss the last
    lines may be missing; ``--resume`` then runs those episodes again.
    """

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        paths.traces.mkdir(parents=True, exist_ok=True)
        torn = paths.episodes.exists() and paths.episodes.stat().st_size > 0 and not _ends_with_newline(paths.episodes)
        self._file = paths.episodes.open("a", encoding="utf-8")
        if torn:
            # A killed run can leave half a line: end it, so the next record starts on its own line.
            self._file.write("\n")

    def write(self, record: EpisodeRecord, trace: EpisodeTrace | None) -> EpisodeRecord:
        if trace is not None:
            name = trace_filename(record.key)
            tmp = self.paths.traces / (name + ".tmp")
            tmp.write_text(trace.model_dump_json(), encoding="utf-8")
            os.replace(tmp, self.paths.traces / name)  # a killed run never leaves half a trace
            record = record.model_copy(update={"trace": f"traces/{name}"})
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()
        return record

    def close(self) -> None:
        self._file.close()


# -------------------------------------------------------------------------- plan


def plan(config: EvalConfig, tasks_by_env: dict[str, list[tuple[str, str]]]) -> list[WorkItem]:
    """The work of a run, in a deterministic order.

    Args:
        config: the run's configuration.
        tasks_by_env: per env id, its ``(task_id, category)`` pairs on the chosen backend.

    Returns:
        Work items: the filtered, sampled tasks times the repeats.

    Raises:
        ConfigError: a task id asked for that no env has, or filters that leave nothing.
    """
    items: list[WorkItem] = []
    wanted_ids = set(config.task_ids)
    found_ids: set[str] = set()
    categories = {c.lower() for c in config.categories}
    for env_id, tasks in tasks_by_env.items():
        chosen = [(t, c) for t, c in tasks
                  if (not wanted_ids or t in wanted_ids) and (not categories or c.lower() in categories)]
        found_ids |= {t for t, _ in chosen}
        if config.n is not None and len(chosen) > config.n:
            rng = np.random.default_rng(zlib.crc32(f"{config.seed}|{env_id}".encode()))
            keep = sorted(rng.choice(len(chosen), size=config.n, replace=False).tolist())
            chosen = [chosen[i] for i in keep]
        for run in range(config.runs):
            for task_id, _ in chosen:
                items.append(WorkItem(env_id, task_id, run, episode_seed(config.seed, env_id, task_id, run)))
    missing = wanted_ids - found_ids
    if missing:
        raise ConfigError(f"no env of this run has the task ids {sorted(missing)} (with these filters).")
    if not items:
        raise ConfigError("the filters leave no task to run: check --env, --category, --task-id and --backend.")
    return items


def list_tasks(env: gym.Env[str, str]) -> list[tuple[str, str]]:
    """``(task_id, category)`` of every task the env can run on its backend."""
    base = env.unwrapped
    return [(t.id, t.category) for t in base.tasks]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------ the run


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


ProgressFn = Callable[[EpisodeRecord, int, int], None]
"""Called after each episode with (record, episodes done, episodes planned)."""


def run_episodes(
    config: EvalConfig,
    agent_factory: AgentFactory,
    agent_label: str,
    run_dir: Path,
    *,
    env_factory: EnvFactory = default_env_factory,
    resume: bool = False,
    progress: ProgressFn | None = None,
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

    Returns:
        The records written by this call, how many were skipped, the elapsed time.

    Raises:
        ConfigError: ``run_dir`` holds another run (resume with a different config), or
            holds episodes and ``resume`` is False.
    """
    started = time.perf_counter()
    paths = RunPaths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _check_run_dir(paths, config, resume)
    previous = read_records(paths.episodes) if resume else []
    done = {r.key for r in previous if r.status != "infra_error"}
    writer = RecordWriter(paths)
    written: list[EpisodeRecord] = []
    setup = [0.0]
    # The env that lists an env id's tasks (the probe) then runs them, as the first copy of the
    # vector env: one env construction per env id less (on mysql, a server start and stop).
    probes: dict[str, gym.Env[str, str]] = {}
    try:
        envs = [full_env_id(e) for e in config.envs]
        tasks_by_env: dict[str, list[tuple[str, str]]] = {}
        for env_id in envs:
            probe_started = time.perf_counter()
            probes[env_id] = env_factory(env_id, _env_options(config, env_id))
            setup[0] += time.perf_counter() - probe_started
            tasks_by_env[env_id] = list_tasks(probes[env_id])
        items = plan(config, tasks_by_env)
        todo = [it for it in items if it.key not in done]
        total = len(items)
        counter = [total - len(todo)]

        def on_record(record: EpisodeRecord, trace: EpisodeTrace | None) -> None:
            record = writer.write(record, trace)
            written.append(record)
            counter[0] += 1
            if progress is not None:
                progress(record, counter[0], total)

        for env_id in envs:
            mine = [it for it in todo if it.env_id == env_id]
            probe = probes.pop(env_id)
            if mine:
                _run_env(config, env_id, mine, agent_factory, agent_label, env_factory, on_record, setup, probe)
            else:
                probe.close()
    finally:
        for probe in probes.values():  # an error left them unused
            probe.close()
        writer.close()
    return RunOutcome(written, len(done), time.perf_counter() - started, setup[0])


def _check_run_dir(paths: RunPaths, config: EvalConfig, resume: bool) -> None:
    if paths.config.exists():
        stored = json.loads(paths.config.read_text(encoding="utf-8"))
        if not resume and paths.episodes.exists() and paths.episodes.stat().st_size > 0:
            raise ConfigError(f"{paths.root} already holds a run: pass --resume to continue it, or another --output.")
        stored_key = EvalConfig.model_validate(stored).resume_key()
        if resume and stored_key != config.resume_key():
            diff = sorted(k for k in stored_key if stored_key[k] != config.resume_key()[k])
            raise ConfigError(f"{paths.root} holds a run with other settings ({', '.join(diff)}): "
                              "resume it with the same options, or use another --output.")
    paths.config.write_text(config.model_dump_json(indent=2), encoding="utf-8")


def _env_options(config: EvalConfig, env_id: str) -> dict[str, Any]:
    options: dict[str, Any] = {"backend": backend_for(env_id, config.backends), **config.env_options}
    options["max_seconds"] = config.episode_timeout_s
    if config.trap_rate is not None:
        options["trap_rate"] = config.trap_rate
    return options


def _given(env: gym.Env[str, str]) -> Callable[[], gym.Env[str, str]]:
    return lambda: env


class ThreadedVectorEnv(SyncVectorEnv):
    """A :class:`~gymnasium.vector.SyncVectorEnv` whose copies are made, reset and stepped in a
    thread pool: one process, no pickling, yet the copies' I/O (a container's shell, a
    database server) overlaps. Each copy is only ever used by one thread at a time.

    Autoreset is disabled (the runner resets copies with ``reset_mask``), the one mode this
    class implements.

    Example::

        vec = ThreadedVectorEnv([lambda: gym.make("AgentUnit/DB-v0", backend="sqlite")] * 4)
        obs, infos = vec.reset(seed=0)
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env[str, str]]]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(env_fns)), thread_name_prefix="env")
        try:
            made = list(self._pool.map(lambda fn: fn(), env_fns))  # containers start side by side
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        super().__init__([_given(e) for e in made], autoreset_mode=AutoresetMode.DISABLED)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = list(seed) if isinstance(seed, list) else [
            None if seed is None else seed + i for i in range(self.num_envs)]
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.num_envs, dtype=bool))
        chosen = [i for i in range(self.num_envs) if mask[i]]
        results = list(self._pool.map(lambda i: self.envs[i].reset(seed=seeds[i], options=options or None), chosen))
        infos: dict[str, Any] = {}
        for i, (obs, info) in zip(chosen, results, strict=True):
            self._env_obs[i] = obs
            self._terminations[i] = self._truncations[i] = self._autoreset_envs[i] = False
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return deepcopy(self._observations), infos

    def step(self, actions: Any, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                                                       dict[str, Any]]:
        """Step every copy in the pool; ``timeout`` bounds the wait (``TimeoutError`` past it)."""
        if bool(np.any(self._autoreset_envs)):
            raise EpisodeStateError("step() on a copy whose episode ended: reset it with options['reset_mask'].")
        pairs = list(zip(self.envs, iterate(self.action_space, actions), strict=True))
        results = list(self._pool.map(lambda pair: pair[0].step(pair[1]), pairs, timeout=timeout))
        infos: dict[str, Any] = {}
        for i, (obs, reward, terminated, truncated, info) in enumerate(results):
            self._env_obs[i] = obs
            self._rewards[i], self._terminations[i], self._truncations[i] = reward, terminated, truncated
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (deepcopy(self._observations), np.copy(self._rewards), np.copy(self._terminations),
                np.copy(self._truncations), infos)

    def close_extras(self, **kwargs: Any) -> None:
        envs = getattr(self, "envs", [])
        try:
            if len(envs) > 1:
                # Side by side: a copy's close can take 0.1-0.2 s (removing its containers). A
                # pool of its own, since a copy's step that timed out may still hold the other.
                with ThreadPoolExecutor(max_workers=len(envs), thread_name_prefix="env-close") as closer:
                    list(closer.map(lambda env: env.close(), envs))
            else:
                super().close_extras(**kwargs)
        finally:
            self._pool.shutdown(wait=False)


def make_vector_env(fns: list[Callable[[], gym.Env[str, str]]], mode: VectorMode) -> SyncVectorEnv | AsyncVectorEnv:
    """A vector env over ``fns`` that the runner resets itself (autoreset disabled).

    ``sync``: gymnasium's SyncVectorEnv, copies stepped one after another; ``threads``:
    :class:`ThreadedVectorEnv`, copies stepped in a thread pool; ``async``: gymnasium's
    AsyncVectorEnv, a process per copy.

    Raises:
        ConfigError: an unknown mode.
    """
    if mode == "sync":
        return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
    if mode == "threads":
        return ThreadedVectorEnv(fns)
    if mode == "async":
        # Text spaces cannot live in shared memory; observations travel through the pipes.
        return AsyncVectorEnv(fns, shared_memory=False, autoreset_mode=AutoresetMode.DISABLED)
    raise ConfigError(f"vector mode must be 'sync', 'threads' or 'async', got {mode!r}.")


@dataclass
class _Slot:
    agent: Agent
    item: WorkItem | None = None
    attempts: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    deadline: float = 0.0
    started: float = 0.0


def _run_env(
    config: EvalConfig,
    env_id: str,
    items: list[WorkItem],
    agent_factory: AgentFactory,
    agent_label: str,
    env_factory: EnvFactory,
    on_record: Callable[[EpisodeRecord, EpisodeTrace | None], None],
    setup: list[float],
    probe: gym.Env[str, str],
) -> None:
    """Run ``items`` on a vector env of ``env_id``, whose first copy is ``probe`` (closed here)."""
    width = min(config.concurrency, len(items))
    options = _env_options(config, env_id)
    fns = [_schedule_fn(env_factory, env_id, options) for _ in range(width)]
    try:
        if config.vector == "async":
            probe.close()  # each copy is made in its own process
        else:
            fns[0] = _given(ScheduleEpisodes(probe, env_id))
        queue: deque[tuple[WorkItem, int]] = deque((it, 1) for it in items)
        slots = [_Slot(agent=agent_factory()) for _ in range(width)]
        wants_reference = needs_reference(slots[0].agent)
        made = time.perf_counter()
        vec = make_vector_env(fns, config.vector)
    except BaseException:
        probe.close()  # idempotent; the vector env was not made, so nothing else owns it
        raise
    setup[0] += time.perf_counter() - made
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="agent")
    try:
        needs_reset = np.ones(width, dtype=bool)
        while True:
            if needs_reset.any():
                _assign(vec, slots, needs_reset, queue, config, wants_reference)
                if all(s.item is None for s in slots) and not queue:
                    break
                needs_reset = _reset_slots(vec, slots, needs_reset, queue, config, agent_label, on_record)
                if needs_reset.any():
                    continue
            actions = _act_all(pool, slots, config, agent_factory)
            observations, _, terminated, truncated, infos = _vec_step(vec, tuple(actions), config.episode_timeout_s)
            packets = infos.get("packet")
            for i, slot in enumerate(slots):
                if slot.item is None or packets is None:
                    continue
                packet: Packet = packets[i]
                if packet.kind == "infra_error":
                    _retry_or_record(slot, packet.error, queue, config, agent_label, on_record)
                    needs_reset[i] = True
                elif terminated[i] or truncated[i]:
                    _finish(slot, packet, agent_label, on_record)
                    needs_reset[i] = True
                else:
                    slot.observation = str(observations[i])
                    slot.info = {**slot.info, **packet.info}
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(vec, AsyncVectorEnv):
            # A worker may be stuck in a step: waiting for it would hang the error path too.
            vec.close(terminate=True)
        else:
            vec.close()
        raise
    pool.shutdown(wait=False, cancel_futures=True)
    vec.close()


STEP_GRACE_S = 60.0
"""How long past the episode limit a vector step may take before the run gives up on the backend."""


def _vec_step(vec: SyncVectorEnv | AsyncVectorEnv, actions: tuple[str, ...], limit: float) -> tuple[Any, ...]:
    """One vector step with a deadline where the vector env allows one (async and threads).

    Raises:
        BackendTimeoutError: a copy's step did not return in time (its backend is stuck).
    """
    timeout = limit + STEP_GRACE_S
    try:
        if isinstance(vec, AsyncVectorEnv):
            vec.step_async(actions)
            return tuple(vec.step_wait(timeout=timeout))
        if isinstance(vec, ThreadedVectorEnv):
            return tuple(vec.step(actions, timeout=timeout))
    except (TimeoutError, multiprocessing.TimeoutError) as exc:
        raise BackendTimeoutError(
            f"an env step did not return within {timeout:g} s: its backend looks stuck. Check the daemon or "
            "server, then rerun with --resume."
        ) from exc
    # SyncVectorEnv steps in this thread: the backends' own per-command timeouts bound it.
    return tuple(vec.step(actions))


def _schedule_fn(env_factory: EnvFactory, env_id: str, options: dict[str, Any]) -> Callable[[], gym.Env[str, str]]:
    def make() -> gym.Env[str, str]:
        return ScheduleEpisodes(env_factory(env_id, dict(options)), env_id)

    return make


def _assign(vec: SyncVectorEnv | AsyncVectorEnv, slots: list[_Slot], mask: np.ndarray,
            queue: deque[tuple[WorkItem, int]], config: EvalConfig, reference: bool) -> None:
    assignments: list[dict[str, Any] | None] = []
    for i, slot in enumerate(slots):
        if mask[i]:
            slot.item = None
            if queue:
                slot.item, slot.attempts = queue.popleft()
        if slot.item is None:
            assignments.append(None)
            continue
        if mask[i]:
            slot.started = time.time()
            slot.deadline = slot.started + config.episode_timeout_s
        assignments.append({"task_id": slot.item.task_id, "seed": slot.item.seed, "key": slot.item.key,
                            "reference": reference, "deadline": slot.deadline})
    vec.set_attr("assignment", assignments)


def _reset_slots(vec: SyncVectorEnv | AsyncVectorEnv, slots: list[_Slot], mask: np.ndarray,
                 queue: deque[tuple[WorkItem, int]], config: EvalConfig, agent_label: str,
                 on_record: Callable[[EpisodeRecord, EpisodeTrace | None], None]) -> np.ndarray:
    seeds = [s.item.seed if s.item is not None else None for s in slots]
    obs, infos = vec.reset(seed=seeds, options={"reset_mask": mask.copy()})
    again = np.zeros_like(mask)
    packets = infos.get("packet")
    for i, slot in enumerate(slots):
        if not mask[i] or slot.item is None or packets is None:
            continue
        packet: Packet = packets[i]
        if packet.kind == "infra_error":
            _retry_or_record(slot, packet.error, queue, config, agent_label, on_record)
            again[i] = True
            continue
        slot.info = dict(packet.info)
        slot.observation = obs[i]
        try:
            reset_agent(slot.agent, slot.info)
        except Exception as exc:  # noqa: BLE001 - any agent failure ends its episode, never the run
            slot.info[_AGENT_ABORT] = _agent_failure(slot, exc)
    return again


_AGENT_ABORT = "agent_abort"
"""Key of a slot's info holding the abort action for an agent that failed in its reset."""


def _agent_failure(slot: _Slot, exc: Exception) -> str:
    """The abort action ending ``slot``'s episode after its agent raised ``exc``.

    A context overflow ends the episode as CLE (AgentBench's agent context limit): the
    record stays ``done``. Anything else is an agent error, recorded as such and never retried.
    """
    if isinstance(exc, AgentContextLimitError):
        return f"{ABORT_PREFIX}{FinishReason.CONTEXT_LIMIT.value}:agent context limit: {exc}"
    slot.info["agent_error"] = f"{type(exc).__name__}: {exc}"
    return f"{ABORT_PREFIX}{FinishReason.ERROR.value}:agent failed: {slot.info['agent_error']}"


def _act_all(pool: ThreadPoolExecutor, slots: list[_Slot], config: EvalConfig,
             agent_factory: AgentFactory) -> list[str]:
    futures: list[Future[str] | None] = []
    for slot in slots:
        if slot.item is None or _AGENT_ABORT in slot.info:
            futures.append(None)
        else:
            futures.append(pool.submit(slot.agent.act, slot.observation, slot.info))
    actions: list[str] = []
    for slot, fut in zip(slots, futures, strict=True):
        if slot.item is None:
            actions.append("")
            continue
        if fut is None:
            actions.append(str(slot.info[_AGENT_ABORT]))
            continue
        try:
            reply = fut.result(timeout=max(0.0, slot.deadline - time.time()) + 1.0)
            actions.append(reply if isinstance(reply, str) else str(reply))
        except FutureTimeout:
            # The agent's thread cannot be killed; the slot gets a fresh agent and the episode ends as TLE.
            slot.agent = agent_factory()
            actions.append(f"{ABORT_PREFIX}{FinishReason.TASK_LIMIT.value}:wall-clock limit "
                           f"{config.episode_timeout_s:g} s reached while the agent was replying")
        except Exception as exc:  # noqa: BLE001 - an agent failure is recorded, never retried
            actions.append(_agent_failure(slot, exc))
    return actions


def _finish(slot: _Slot, packet: Packet, agent_label: str,
            on_record: Callable[[EpisodeRecord, EpisodeTrace | None], None]) -> None:
    assert slot.item is not None
    trace = packet.trace
    if trace is not None and (trace.env_id is None or trace.seed is None):
        trace = trace.model_copy(update={"env_id": trace.env_id or slot.item.env_id,
                                         "seed": trace.seed if trace.seed is not None else slot.item.seed})
    agent_error = slot.info.get("agent_error")
    score = trace.score if trace is not None else None
    record = EpisodeRecord(
        key=slot.item.key, env_id=slot.item.env_id, task_id=slot.item.task_id, run=slot.item.run,
        seed=slot.item.seed, agent=agent_label, status="agent_error" if agent_error else "done",
        attempts=slot.attempts, success=bool(score and score.success), reward=float(score.reward if score else 0.0),
        finish_reason=trace.finish_reason.value if trace is not None and trace.finish_reason else None,
        steps=len(trace.steps) if trace is not None else 0, wall_s=time.time() - slot.started,
        error=str(agent_error or ""),
    )
    on_record(record, trace)
    slot.item = None


def _retry_or_record(slot: _Slot, error: str, queue: deque[tuple[WorkItem, int]], config: EvalConfig,
                     agent_label: str, on_record: Callable[[EpisodeRecord, EpisodeTrace | None], None]) -> None:
    assert slot.item is not None
    if slot.attempts <= config.max_infra_retries:
        queue.appendleft((slot.item, slot.attempts + 1))
    else:
        it = slot.item
        on_record(EpisodeRecord(key=it.key, env_id=it.env_id, task_id=it.task_id, run=it.run, seed=it.seed,
                                agent=agent_label, status="infra_error", attempts=slot.attempts,
                                finish_reason=FinishReason.ERROR.value, error=error), None)
    slot.item = None


def iter_records(run_dir: Path) -> Iterator[tuple[EpisodeRecord, EpisodeTrace | None]]:
    """Every record of a run with its trace (None if missing)."""
    for record in read_records(RunPaths(run_dir).episodes):
        yield record, load_trace(run_dir, record)
