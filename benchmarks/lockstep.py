"""Lockstep evaluation over a gymnasium vector env (``--vector sync|threads|async``).

Each turn the agents of every copy act in a thread pool, then one ``step`` of the vector
env runs every copy's action: every episode moves at the pace of the slowest reply of its
turn. This is the RL-style loop; the default evaluation schedules episodes independently
(:mod:`agentunit_gym.eval.episodes`). Agents may be ``async``: each reply then runs on an
event loop of its agent thread's own.

The vector env uses gymnasium's ``AutoresetMode.DISABLED``: the runner resets exactly the
copies that finished, with their next task, through ``reset(options={"reset_mask": ...})``;
copies with no work left idle. Tasks and aborts reach the copies out of band, through
``set_attr`` (``assignment``, ``pending_abort``).
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.agents import AgentFactory, act_blocking, needs_reference, reset_agent
from agentunit_gym.eval.config import DEFAULT_VECTOR_MODE, EvalConfig
from agentunit_gym.eval.plan import WorkItem
from agentunit_gym.eval.schedule import Assignment, Packet, ScheduleEpisodes
from agentunit_gym.eval.slots import (
    RecordSink,
    Slot,
    WorkQueue,
    agent_failure,
    agent_timeout,
    finish,
    record_task_error,
    retry_or_record,
)
from agentunit_gym.eval.vector import ThreadedVectorEnv, make_vector_env

AnyVectorEnv = SyncVectorEnv | AsyncVectorEnv | ThreadedVectorEnv

STEP_GRACE_S = 60.0
"""How long past the episode limit a vector step may take before the run gives up on the backend."""


def run_lockstep(config: EvalConfig, items: list[WorkItem], agent_factory: AgentFactory, agent_label: str,
                 copy_fns: list[Callable[[], gym.Env[str, str]]], probe: gym.Env[str, str] | None,
                 sink: RecordSink) -> float:
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
        vec = make_vector_env(copy_fns, config.vector or DEFAULT_VECTOR_MODE)
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


__all__ = ["STEP_GRACE_S", "run_lockstep", "schedule_fn"]
