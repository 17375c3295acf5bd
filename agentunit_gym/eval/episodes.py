"""Asynchronous episodes, the default schedule: each episode advances as soon as its own
agent replies, with no per-turn barrier between episodes.

One event loop drives ``width`` workers (``width = min(concurrency, episodes)``); each owns
one env copy (under :class:`~agentunit_gym.eval.schedule.ScheduleEpisodes`) and one agent,
and runs episodes from the shared queue one after another. Agents may be asynchronous
(``async def act``: awaited on the loop, so hundreds can wait on a model at once) or
synchronous (run in a thread pool). Env resets and steps block (a container's shell, a
database server), so they run in a thread pool of one thread per env copy; every call has
a deadline (the episode limit plus :data:`STEP_GRACE_S`), past which the run stops with
:class:`~agentunit_gym.errors.BackendTimeoutError` as the lockstep loop does.

Why: model latency is heavy-tailed. With a per-turn barrier (the lockstep loop) every
episode moves at the pace of the slowest reply of its turn; here a slow reply holds up
only its own episode (docs/performance.md, "Asynchronous episodes").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.agents import AgentFactory, act_async, needs_reference, reset_agent_async
from agentunit_gym.eval.config import EvalConfig
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

STEP_GRACE_S = 60.0
"""How long past the episode limit an env reset or step may take before the run gives up on the backend."""

T = TypeVar("T")

logger = logging.getLogger(__name__)


def run_async(config: EvalConfig, items: list[WorkItem], agent_factory: AgentFactory, agent_label: str,
              make_copy: Callable[[], ScheduleEpisodes], probe: ScheduleEpisodes | None, sink: RecordSink) -> float:
    """Run ``items`` as independent episodes on ``min(concurrency, len(items))`` env copies;
    ``probe``, when given, is the first copy. Every copy is closed here.

    Returns:
        The seconds spent making the env copies and starting their backends.

    Raises:
        BackendTimeoutError: an env call did not return in time (its backend is stuck).
    """
    width = min(config.concurrency, len(items))
    env_pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="env")
    # A thread per episode for synchronous agents, plus a few for agents replaced after a
    # timeout whose old thread still runs (it cannot be killed).
    agent_pool = ThreadPoolExecutor(max_workers=width + 4, thread_name_prefix="agent")
    copies: list[ScheduleEpisodes] = [probe] if probe is not None else []
    made = time.perf_counter()
    try:
        copies += list(env_pool.map(lambda _: make_copy(), range(width - len(copies))))
        list(env_pool.map(_warm_up, copies))
        setup_s = time.perf_counter() - made
        scheduler = _Scheduler(config, agent_factory, agent_label, sink, env_pool, agent_pool)
        _run_coroutine(scheduler.run(deque((it, 1) for it in items), copies))
    finally:
        agent_pool.shutdown(wait=False, cancel_futures=True)
        # Side by side (a copy's close can take 0.1-0.2 s), in a pool of their own: a step
        # that timed out may still hold an env thread.
        with ThreadPoolExecutor(max_workers=max(1, len(copies)), thread_name_prefix="env-close") as closer:
            list(closer.map(lambda env: env.close(), copies))
        env_pool.shutdown(wait=False, cancel_futures=True)
    return setup_s


def _warm_up(env: ScheduleEpisodes) -> None:
    """Start an env copy's backend now, side by side with the others, rather than in its first
    episode. A failure is left for that episode's reset to meet (and classify, or retry)."""
    warm = getattr(env.unwrapped, "warm_up", None)
    if warm is None:
        return
    try:
        warm()
    except Exception as exc:  # noqa: BLE001 - the first reset raises it again, on the usual path
        logger.debug("warming up an env copy failed (its first reset will retry): %s", exc)


def _run_coroutine(coroutine: Any) -> None:
    """``asyncio.run``, or in a thread of its own when this thread already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coroutine)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-loop") as runner:
        runner.submit(asyncio.run, coroutine).result()


class _Scheduler:
    def __init__(self, config: EvalConfig, agent_factory: AgentFactory, agent_label: str, sink: RecordSink,
                 env_pool: ThreadPoolExecutor, agent_pool: ThreadPoolExecutor) -> None:
        self.config = config
        self.agent_factory = agent_factory
        self.agent_label = agent_label
        self.sink = sink
        self.env_pool = env_pool
        self.agent_pool = agent_pool

    async def run(self, queue: WorkQueue, copies: list[ScheduleEpisodes]) -> None:
        slots = [Slot(agent=self.agent_factory()) for _ in copies]
        reference = needs_reference(slots[0].agent)
        tasks = [asyncio.create_task(self._worker(queue, copy, slot, reference))
                 for copy, slot in zip(copies, slots, strict=True)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _worker(self, queue: WorkQueue, copy: ScheduleEpisodes, slot: Slot, reference: bool) -> None:
        while queue:
            item, attempts = queue.popleft()
            slot.start(item, attempts, self.config.episode_timeout_s)
            copy.assignment = Assignment(task_id=item.task_id, seed=item.seed, key=item.key, reference=reference,
                                         deadline=slot.deadline)
            await self._episode(queue, copy, slot)

    async def _episode(self, queue: WorkQueue, copy: ScheduleEpisodes, slot: Slot) -> None:
        observation, info = await self._env(copy.reset)
        packet: Packet = info["packet"]
        if packet.kind == "infra_error":
            retry_or_record(slot, packet.error, queue, self.config.max_infra_retries, self.agent_label, self.sink)
            return
        if packet.kind == "task_error":
            record_task_error(slot, packet.error, self.agent_label, self.sink)
            return
        slot.info, slot.observation = dict(packet.info), observation
        try:
            await reset_agent_async(slot.agent, slot.info, self.agent_pool)
        except Exception as exc:  # noqa: BLE001 - any agent failure ends its episode, never the run
            slot.abort = agent_failure(slot, exc)
        while slot.item is not None:
            reply = "" if slot.abort is not None else await self._reply(slot)
            if slot.abort is not None:
                observation, _, terminated, truncated, info = await self._env(copy.abort_episode, slot.abort)
            else:
                observation, _, terminated, truncated, info = await self._env(copy.step, reply)
            packet = info["packet"]
            if packet.kind == "infra_error":
                retry_or_record(slot, packet.error, queue, self.config.max_infra_retries, self.agent_label, self.sink)
            elif packet.kind == "task_error":
                record_task_error(slot, packet.error, self.agent_label, self.sink)
            elif terminated or truncated:
                finish(slot, packet, self.agent_label, self.sink)
            else:
                slot.observation = observation
                slot.info = {**slot.info, **packet.info}

    async def _reply(self, slot: Slot) -> str:
        """The agent's reply; on a failure or past the deadline, sets ``slot.abort`` and returns ""."""
        task = asyncio.ensure_future(act_async(slot.agent, slot.observation, slot.info, self.agent_pool))
        done, _ = await asyncio.wait({task}, timeout=max(0.0, slot.deadline - time.time()) + 1.0)
        if not done:
            task.cancel()
            # A synchronous agent's thread cannot be killed: the slot gets a fresh agent.
            slot.agent = self.agent_factory()
            slot.abort = agent_timeout(self.config.episode_timeout_s)
            return ""
        try:
            reply = task.result()
        except Exception as exc:  # noqa: BLE001 - an agent failure is recorded, never retried
            slot.abort = agent_failure(slot, exc)
            return ""
        return reply if isinstance(reply, str) else str(reply)

    async def _env(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on an env thread, within the episode limit plus the grace.

        Raises:
            BackendTimeoutError: it did not return in time.
        """
        timeout = self.config.episode_timeout_s + STEP_GRACE_S
        future = asyncio.get_running_loop().run_in_executor(self.env_pool, fn, *args)
        # Not asyncio.wait_for: before Python 3.12 it returns the result, and drops the
        # cancellation, when a Ctrl-C lands as the call completes; the run then went on to the end.
        done, _ = await asyncio.wait({future}, timeout=timeout)
        if not done:
            future.cancel()
            raise BackendTimeoutError(
                f"an env call did not return within {timeout:g} s: its backend looks stuck. Check the daemon "
                "or server, then rerun with --resume."
            )
        return future.result()


async def run_queue(config: EvalConfig, queue: WorkQueue, copy: ScheduleEpisodes, slot: Slot,
                    agent_factory: AgentFactory, agent_label: str, sink: RecordSink,
                    env_pool: ThreadPoolExecutor, agent_pool: ThreadPoolExecutor) -> None:
    """Run the episodes of ``queue`` one after another on ``copy`` with ``slot``'s agent: the
    loop each worker of :func:`run_async` runs, for a caller that owns its copies and pools
    (the Ray actors of :mod:`agentunit_gym.eval.cluster`). Infrastructure retries go back
    into ``queue``.

    Raises:
        BackendTimeoutError: an env call did not return in time.
    """
    scheduler = _Scheduler(config, agent_factory, agent_label, sink, env_pool, agent_pool)
    await scheduler._worker(queue, copy, slot, needs_reference(slot.agent))


__all__ = ["STEP_GRACE_S", "run_async", "run_queue"]
