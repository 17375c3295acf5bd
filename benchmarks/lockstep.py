"""The lockstep loop, kept as a baseline for the benchmarks (no longer in the package: the
evaluator's one engine is :mod:`agentunit_gym.eval.run.engine`).

Each turn the agents of every copy act in a thread pool, then one ``step`` of a vector env
runs every copy's action: every episode moves at the pace of the slowest reply of its turn.
This is how the evaluator ran ``--vector sync|threads|async`` before the asynchronous engine
became the only one; ``threads`` is :class:`ThreadedVectorEnv` below, a vector env whose
copies step in a thread pool. Agents may be ``async``: each reply then runs on an event loop
of its agent thread's own.

:func:`run_lockstep_episodes` is ``run_episodes`` (plan, probe as first copy, records) with
this loop in place of the engine, without resume. Usage::

    outcome = run_lockstep_episodes(config, OracleAgent, "oracle", Path("run"), mode="threads")

The vector env uses gymnasium's ``AutoresetMode.DISABLED``: the runner resets exactly the
copies that finished, with their next task, through ``reset(options={"reset_mask": ...})``;
copies with no work left idle. Tasks and aborts reach the copies out of band, through
``set_attr`` (``assignment``, ``pending_abort``).
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from copy import deepcopy
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agentunit_gym.errors import BackendTimeoutError, ConfigError, EpisodeStateError
from agentunit_gym.eval.agents.builtin import AgentFactory, act_blocking, needs_reference, reset_agent
from agentunit_gym.eval.plan.config import EvalConfig, VectorMode
from agentunit_gym.eval.plan.routing import EnvFactory, default_env_factory, full_env_id
from agentunit_gym.eval.plan.work import WorkItem, list_tasks, plan
from agentunit_gym.eval.record.records import RecordWriter, RunPaths, check_run_dir
from agentunit_gym.eval.run.deadlines import STEP_GRACE_S
from agentunit_gym.eval.run.runner import RunOutcome, env_options
from agentunit_gym.eval.run.schedule import Assignment, Packet, ScheduleEpisodes
from agentunit_gym.eval.run.slots import (
    RecordSink,
    Slot,
    WorkQueue,
    agent_failure,
    agent_timeout,
    finish,
    record_task_error,
    retry_or_record,
)


def run_lockstep_episodes(config: EvalConfig, agent_factory: AgentFactory, agent_label: str, run_dir: Path,
                          *, mode: VectorMode = "threads", env_factory: EnvFactory = default_env_factory,
                          ) -> RunOutcome:
    """``run_episodes`` with the lockstep loop over a ``mode`` vector env (no resume)."""
    started = time.perf_counter()
    paths = RunPaths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    check_run_dir(paths, config, False)
    writer = RecordWriter(paths)
    probes: dict[str, gym.Env[str, str]] = {}
    setup_s = 0.0
    try:
        envs = [full_env_id(e) for e in config.envs]
        for env_id in envs:
            probe_started = time.perf_counter()
            probes[env_id] = env_factory(env_id, env_options(config, env_id))
            setup_s += time.perf_counter() - probe_started
        items = plan(config, {env_id: list_tasks(probe) for env_id, probe in probes.items()})
        sink = RecordSink(writer, 0, len(items), None)
        for env_id in envs:
            mine = [it for it in items if it.env_id == env_id]
            options = env_options(config, env_id)
            fns = [schedule_fn(_maker(env_factory, env_id, options), env_id)
                   for _ in range(min(config.concurrency, len(mine)))]
            probe = probes.pop(env_id)
            first: gym.Env[str, str] | None = ScheduleEpisodes(probe, env_id)
            if mode == "async":
                probe.close()  # each copy is made in its own process
                first = None
            setup_s += run_lockstep(config, mine, agent_factory, agent_label, fns, first, sink, mode)
    finally:
        for probe in probes.values():
            probe.close()
        writer.close()
    return RunOutcome(sink.written, 0, time.perf_counter() - started, setup_s)


def _maker(env_factory: EnvFactory, env_id: str, options: dict[str, Any]) -> Callable[[], gym.Env[str, str]]:
    return lambda: env_factory(env_id, dict(options))


def run_lockstep(config: EvalConfig, items: list[WorkItem], agent_factory: AgentFactory, agent_label: str,
                 copy_fns: list[Callable[[], gym.Env[str, str]]], probe: gym.Env[str, str] | None,
                 sink: RecordSink, mode: VectorMode = "threads") -> float:
    """Run ``items`` on a vector env over ``copy_fns`` (each making a :class:`ScheduleEpisodes`
    copy); ``probe``, when given, is the first copy (closed here in every case).

    Returns:
        The seconds spent making the vector env.
    """
    width = len(copy_fns)
    try:
        if probe is not None:
            copy_fns[0] = _given(probe)
        queue: WorkQueue = deque((it, 1) for it in items)
        slots = [Slot(agent=agent_factory()) for _ in range(width)]
        wants_reference = needs_reference(slots[0].agent)
        made = time.perf_counter()
        vec = make_vector_env(copy_fns, mode)
    except BaseException:
        if probe is not None:
            probe.close()  # idempotent; the vector env was not made, so nothing else owns it
        raise
    setup_s = time.perf_counter() - made
    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="agent")
    try:
        needs_reset = np.ones(width, dtype=bool)
        while True:
            if needs_reset.any():
                _assign(vec, slots, needs_reset, queue, config, wants_reference)
                if all(s.item is None for s in slots) and not queue:
                    break
                needs_reset = _reset_slots(vec, slots, needs_reset, queue, config, agent_label, sink)
                if needs_reset.any():
                    continue
            actions = _act_all(pool, slots, config, agent_factory)
            aborts = [s.abort if s.item is not None else None for s in slots]
            if any(a is not None for a in aborts):
                vec.set_attr("pending_abort", aborts)
            observations, _, terminated, truncated, infos = _vec_step(vec, tuple(actions), config.episode_timeout_s)
            packets = infos.get("packet")
            for i, slot in enumerate(slots):
                if slot.item is None or packets is None:
                    continue
                packet: Packet = packets[i]
                if packet.kind == "infra_error":
                    retry_or_record(slot, packet.error, queue, config.max_infra_retries, agent_label, sink)
                    needs_reset[i] = True
                elif packet.kind == "task_error":
                    record_task_error(slot, packet.error, agent_label, sink)
                    needs_reset[i] = True
                elif terminated[i] or truncated[i]:
                    finish(slot, packet, agent_label, sink)
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
    return setup_s


def _vec_step(vec: AnyVectorEnv, actions: tuple[str, ...], limit: float) -> tuple[Any, ...]:
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


def schedule_fn(make_env: Callable[[], gym.Env[str, str]], env_id: str) -> Callable[[], gym.Env[str, str]]:
    """A copy maker for a vector env: ``make_env``'s env under :class:`ScheduleEpisodes`."""
    def make() -> gym.Env[str, str]:
        return ScheduleEpisodes(make_env(), env_id)

    return make


def _given(env: gym.Env[str, str]) -> Callable[[], gym.Env[str, str]]:
    return lambda: env


def _assign(vec: AnyVectorEnv, slots: list[Slot], mask: np.ndarray, queue: WorkQueue, config: EvalConfig,
            reference: bool) -> None:
    assignments: list[Assignment | None] = []
    for i, slot in enumerate(slots):
        if mask[i]:
            slot.item = None
            if queue:
                item, attempts = queue.popleft()
                slot.start(item, attempts, config.episode_timeout_s)
        if slot.item is None:
            assignments.append(None)
            continue
        assignments.append(Assignment(task_id=slot.item.task_id, seed=slot.item.seed, key=slot.item.key,
                                      reference=reference, deadline=slot.deadline))
    vec.set_attr("assignment", assignments)


def _reset_slots(vec: AnyVectorEnv, slots: list[Slot], mask: np.ndarray, queue: WorkQueue, config: EvalConfig,
                 agent_label: str, sink: RecordSink) -> np.ndarray:
    seeds = [s.item.seed if s.item is not None else None for s in slots]
    obs, infos = vec.reset(seed=seeds, options={"reset_mask": mask.copy()})
    again = np.zeros_like(mask)
    packets = infos.get("packet")
    for i, slot in enumerate(slots):
        if not mask[i] or slot.item is None or packets is None:
            continue
        packet: Packet = packets[i]
        if packet.kind == "infra_error":
            retry_or_record(slot, packet.error, queue, config.max_infra_retries, agent_label, sink)
            again[i] = True
            continue
        if packet.kind == "task_error":
            record_task_error(slot, packet.error, agent_label, sink)
            again[i] = True
            continue
        slot.info = dict(packet.info)
        slot.observation = obs[i]
        try:
            reset_agent(slot.agent, slot.info)
        except Exception as exc:  # noqa: BLE001 - any agent failure ends its episode, never the run
            slot.abort = agent_failure(slot, exc)
    return again


def _act_all(pool: ThreadPoolExecutor, slots: list[Slot], config: EvalConfig,
             agent_factory: AgentFactory) -> list[str]:
    futures: list[Future[str] | None] = []
    for slot in slots:
        if slot.item is None or slot.abort is not None:
            futures.append(None)
        else:
            futures.append(pool.submit(act_blocking, slot.agent, slot.observation, slot.info))
    actions: list[str] = []
    for slot, fut in zip(slots, futures, strict=True):
        if fut is None:
            actions.append("")
            continue
        try:
            reply = fut.result(timeout=max(0.0, slot.deadline - time.time()) + 1.0)
            actions.append(reply if isinstance(reply, str) else str(reply))
        except FutureTimeout:
            # The agent's thread cannot be killed; the slot gets a fresh agent and the episode ends as TLE.
            slot.agent = agent_factory()
            slot.abort = agent_timeout(config.episode_timeout_s)
            actions.append("")
        except Exception as exc:  # noqa: BLE001 - an agent failure is recorded, never retried
            slot.abort = agent_failure(slot, exc)
            actions.append("")
    return actions


# ------------------------------------------------------------------ the vector envs


def batch_infos(infos: Sequence[tuple[int, dict[str, Any]]], num_envs: int) -> dict[str, Any]:
    """Per-copy infos as gymnasium batches them for flat values: ``infos[key]`` an object array
    of length ``num_envs``, ``infos["_" + key]`` the mask of the copies that reported it.

    Nested dicts are not split into arrays (the runner reads whole values per copy).
    """
    batched: dict[str, Any] = {}
    for i, info in infos:
        for key, value in info.items():
            if key not in batched:
                batched[key] = np.full(num_envs, None, dtype=object)
                batched[f"_{key}"] = np.zeros(num_envs, dtype=bool)
            batched[key][i] = value
            batched[f"_{key}"][i] = True
    return batched


class ThreadedVectorEnv(VectorEnv[Any, Any, Any]):
    """A vector env whose copies are made, reset and stepped in a thread pool: one process, no
    pickling, yet the copies' I/O (a container's shell, a database server) overlaps. Each
    copy is only ever used by one thread at a time.

    Autoreset is disabled, the one mode this class implements: reset the copies that
    finished with ``reset(options={"reset_mask": mask})``; stepping a finished copy raises.

    Example::

        vec = ThreadedVectorEnv([lambda: gym.make("AgentUnit/DB-v0", backend="sqlite")] * 4)
        obs, infos = vec.reset(seed=0)
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env[str, str]]]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(env_fns)), thread_name_prefix="env")
        try:
            self.envs = list(self._pool.map(lambda fn: fn(), env_fns))  # containers start side by side
        except BaseException:
            self._pool.shutdown(wait=False)
            raise
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.DISABLED}
        self.render_mode = first.render_mode
        self.spec = first.spec
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations: Any = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._ended = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = list(seed) if isinstance(seed, list) else [
            None if seed is None else seed + i for i in range(self.num_envs)]
        options = dict(options or {})
        mask = options.pop("reset_mask", np.ones(self.num_envs, dtype=bool))
        chosen = [i for i in range(self.num_envs) if mask[i]]
        results = list(self._pool.map(lambda i: self.envs[i].reset(seed=seeds[i], options=options or None), chosen))
        for i, (obs, _) in zip(chosen, results, strict=True):
            self._env_obs[i] = obs
            self._ended[i] = False
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        infos = batch_infos([(i, info) for i, (_, info) in zip(chosen, results, strict=True)], self.num_envs)
        return deepcopy(self._observations), infos

    def step(self, actions: Any, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                                                       dict[str, Any]]:
        """Step every copy in the pool; ``timeout`` bounds the wait (``TimeoutError`` past it).

        Raises:
            EpisodeStateError: a copy's episode ended and it was not reset.
        """
        if bool(np.any(self._ended)):
            raise EpisodeStateError("step() on a copy whose episode ended: reset it with options['reset_mask'].")
        pairs = list(zip(self.envs, iterate(self.action_space, actions), strict=True))
        results = list(self._pool.map(lambda pair: pair[0].step(pair[1]), pairs, timeout=timeout))
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=bool)
        truncations = np.zeros(self.num_envs, dtype=bool)
        for i, (obs, reward, terminated, truncated, _) in enumerate(results):
            self._env_obs[i] = obs
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._ended = np.logical_or(terminations, truncations)
        infos = batch_infos([(i, r[4]) for i, r in enumerate(results)], self.num_envs)
        return deepcopy(self._observations), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every copy (or read it when it is not callable)."""
        results = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(env.get_wrapper_attr(name) for env in self.envs)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on each copy: one value per copy, or the same value on all."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(f"set_attr needs one value per copy ({self.num_envs}), got {len(values)}.")
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        envs = getattr(self, "envs", [])
        try:
            # Side by side: a copy's close can take 0.1-0.2 s (removing its containers). A pool
            # of its own, since a copy's step that timed out may still hold the other.
            with ThreadPoolExecutor(max_workers=max(1, len(envs)), thread_name_prefix="env-close") as closer:
                list(closer.map(lambda env: env.close(), envs))
        finally:
            self._pool.shutdown(wait=False)


def make_vector_env(fns: list[Callable[[], gym.Env[str, str]]],
                    mode: VectorMode) -> SyncVectorEnv | AsyncVectorEnv | ThreadedVectorEnv:
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


AnyVectorEnv = SyncVectorEnv | AsyncVectorEnv | ThreadedVectorEnv

