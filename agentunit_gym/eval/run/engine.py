"""The episode engine: every evaluation runs its episodes here, locally and on each node of a
Ray cluster. Each episode advances as soon as its own agent replies, with no per-turn
barrier between episodes.

One event loop drives workers; each owns one env copy
(:class:`~agentunit_gym.eval.run.copies.EpisodeCopy`, hosted as ``--vector`` says) and one
agent, and runs episodes from a queue one after another. Agents may be asynchronous
(``async def act``: awaited on the loop, so hundreds can wait on a model at once) or
synchronous (run in a thread pool). Env resets and steps block (a container's shell, a
database server), so they run in a thread pool of one thread per env copy; every call has
a deadline (:func:`~agentunit_gym.eval.run.deadlines.episode_call_timeout`: the episode limit
plus :data:`~agentunit_gym.eval.run.deadlines.STEP_GRACE_S`), past which the run stops with
:class:`~agentunit_gym.errors.BackendTimeoutError`.

Two ways in: :func:`run_async` runs a list of work items on ``concurrency`` copies (a local
run); :class:`EpisodeEngine` on its own lets a caller that owns its copies run queues on
them (the Ray actor of :mod:`agentunit_gym.eval.run.cluster_node`, one queue per call).

Why asynchronous: model latency is heavy-tailed. With a per-turn barrier (a lockstep loop,
kept as a baseline in benchmarks/) every episode moves at the pace of the slowest reply of
its turn; here a slow reply holds up only its own episode (docs/performance.md,
"Asynchronous episodes").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.agents.builtin import AgentFactory, act_async, needs_reference, reset_agent_async
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.work import WorkItem
from agentunit_gym.eval.run import deadlines
from agentunit_gym.eval.run.copies import EpisodeCopy
from agentunit_gym.eval.run.schedule import Assignment, Packet
from agentunit_gym.eval.run.slots import (
    RecordSink,
    Slot,
    WorkQueue,
    agent_failure,
    agent_timeout,
    finished_record,
    record_task_error,
    release,
    retry_or_record,
)

T = TypeVar("T")

logger = logging.getLogger(__name__)

AGENT_SPARE_THREADS = 4
"""Agent threads beyond one per copy: a synchronous agent replaced after a timeout keeps its
thread (it cannot be killed) while its successor needs one."""


def run_async(config: EvalConfig, items: list[WorkItem], agent_factory: AgentFactory, agent_label: str,
              make_copy: Callable[[], EpisodeCopy], head: EpisodeCopy | None, sink: RecordSink) -> float:
    """Run ``items`` as independent episodes on ``min(concurrency, len(items))`` env copies;
    ``head``, when given, is the first copy. Every copy is closed here.

    Returns:
        The seconds spent making the env copies and starting their backends.

    Raises:
        BackendTimeoutError: an env call did not return in time (its backend is stuck).
    """
    width = min(config.concurrency, len(items))
    engine = EpisodeEngine(config, agent_factory, agent_label, width)
    copies: list[EpisodeCopy] = [head] if head is not None else []
    made = time.perf_counter()
    try:
        copies += list(engine.env_pool.map(lambda _: make_copy(), range(width - len(copies))))
        list(engine.env_pool.map(_warm_up, copies))
        setup_s = time.perf_counter() - made
        run_coroutine(engine.run(deque((it, 1) for it in items), copies, sink))
    finally:
        engine.close(copies)
    return setup_s


def _warm_up(copy: EpisodeCopy) -> None:
    """Start a copy's backend now, side by side with the others, rather than in its first
    episode. A failure is left for that episode's reset to meet (and classify, or retry)."""
    try:
        copy.warm_up()
    except Exception as exc:  # noqa: BLE001 - the first reset raises it again, on the usual path
        logger.debug("warming up an env copy failed (its first reset will retry): %s", exc)


def run_coroutine(coroutine: Any) -> None:
    """``asyncio.run``, or in a thread of its own when this thread already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coroutine)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval-loop") as runner:
        runner.submit(asyncio.run, coroutine).result()


class EpisodeEngine:
    """Runs episodes on env copies with agents beside them: the one episode loop of the
    evaluator, with its thread pools (env calls and synchronous agents, sized for ``width``
    copies in flight; one thread writing finished episodes' files).

    Example (what :func:`~agentunit_gym.eval.run.runner.run_episodes` does for one env id):
        >>> import tempfile
        >>> from collections import deque
        >>> from pathlib import Path
        >>> import gymnasium as gym
        >>> from agentunit_gym.eval.agents.builtin import OracleAgent
        >>> from agentunit_gym.eval.run.copies import hosted_copy
        >>> from agentunit_gym.eval.plan.work import WorkItem
        >>> from agentunit_gym.eval.record.records import RecordWriter, RunPaths
        >>> from agentunit_gym.eval.run.slots import RecordSink
        >>> folder = tempfile.TemporaryDirectory()
        >>> items = [WorkItem("AgentUnit/DB-v0", task, 0, seed=1) for task in ("db-weather-03", "db-cars-09")]
        >>> copies = [hosted_copy(lambda: gym.make("AgentUnit/DB-v0", backend="sqlite"), "AgentUnit/DB-v0", warm=False)
        ...           for _ in range(2)]
        >>> writer = RecordWriter(RunPaths(Path(folder.name)))
        >>> sink = RecordSink(writer, done=0, total=len(items), progress=None)
        >>> engine = EpisodeEngine(EvalConfig(envs=("DB-v0",)), OracleAgent, "oracle", width=2)
        >>> asyncio.run(engine.run(deque([(item, 1) for item in items]), copies, sink))
        >>> engine.close(copies); writer.close()
        >>> sorted((record.task_id, record.status, record.success) for record in sink.written)
        [('db-cars-09', 'done', True), ('db-weather-03', 'done', True)]
        >>> folder.cleanup()
    """

    def __init__(self, config: EvalConfig, agent_factory: AgentFactory, agent_label: str, width: int) -> None:
        self.config = config
        self.agent_factory = agent_factory
        self.agent_label = agent_label
        self.env_pool = ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix="env")
        self.agent_pool = ThreadPoolExecutor(max_workers=max(1, width) + AGENT_SPARE_THREADS,
                                             thread_name_prefix="agent")
        # One thread writes the finished episodes' files, in the order they finish, off the
        # loop: a trace file's creation and rename block for ~1 ms, during which the loop
        # would hand nothing to the other episodes.
        self.record_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="records")

    async def run(self, queue: WorkQueue, copies: list[EpisodeCopy], sink: RecordSink) -> None:
        """Run ``queue`` to the end with one worker per copy, each with an agent of its own.

        Raises:
            BackendTimeoutError: an env call did not return in time (the other workers are cancelled).
        """
        slots = [Slot(agent=self.agent_factory()) for _ in copies]
        tasks = [asyncio.create_task(self.run_queue(queue, copy, slot, sink))
                 for copy, slot in zip(copies, slots, strict=True)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def run_queue(self, queue: WorkQueue, copy: EpisodeCopy, slot: Slot, sink: RecordSink) -> None:
        """Run the episodes of ``queue`` one after another on ``copy`` with ``slot``'s agent;
        infrastructure retries go back into ``queue``.

        Raises:
            BackendTimeoutError: an env call did not return in time.
        """
        reference = needs_reference(slot.agent)
        while queue:
            item, attempts = queue.popleft()
            slot.start(item, attempts, self.config.episode_timeout_s)
            copy.assign(Assignment(task_id=item.task_id, seed=item.seed, key=item.key, reference=reference,
                                   deadline=slot.deadline))
            await self._episode(queue, copy, slot, sink)

    async def _episode(self, queue: WorkQueue, copy: EpisodeCopy, slot: Slot, sink: RecordSink) -> None:
        observation, info = await self._env(copy.reset)
        packet: Packet = info["packet"]
        if packet.kind == "infra_error":
            retry_or_record(slot, packet.error, queue, self.config.max_infra_retries, self.agent_label, sink)
            return
        if packet.kind == "task_error":
            record_task_error(slot, packet.error, self.agent_label, sink)
            return
        slot.info, slot.observation = dict(packet.reset_info()), observation
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
                retry_or_record(slot, packet.error, queue, self.config.max_infra_retries, self.agent_label, sink)
            elif packet.kind == "task_error":
                record_task_error(slot, packet.error, self.agent_label, sink)
            elif terminated or truncated:
                await self._finish(slot, packet, sink)
            else:
                slot.observation = observation
                slot.info = {**slot.info, **packet.step_info()}

    async def _finish(self, slot: Slot, packet: Packet, sink: RecordSink) -> None:
        """Record ``slot``'s finished episode, its files written on the records thread
        (:meth:`RecordSink.record_off_loop`); the slot's next episode starts once they are
        flushed, the other slots' episodes go on meanwhile.

        Raises:
            OSError: the files could not be written.
            RunStoppedError: most finished episodes failed for the same reason.
            EndpointDownError: the model endpoint that failed this episode stayed down.
        """
        await sink.record_off_loop(*finished_record(slot, packet, self.agent_label), self.record_pool)
        release(slot, sink)

    async def _reply(self, slot: Slot) -> str:
        """The agent's reply; on a failure or past the deadline, sets ``slot.abort`` and returns ""."""
        task = asyncio.ensure_future(act_async(slot.agent, slot.observation, slot.info, self.agent_pool))
        timeout = max(0.0, slot.deadline - time.time()) + deadlines.AGENT_GRACE_S
        done, _ = await asyncio.wait({task}, timeout=timeout)
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
        timeout = deadlines.episode_call_timeout(self.config.episode_timeout_s)
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

    def close(self, copies: Sequence[EpisodeCopy]) -> None:
        """Close ``copies`` side by side (a copy's close can take 0.1-0.2 s), then the pools.
        The copies close in a pool of their own: a step that timed out may still hold an env thread."""
        self.agent_pool.shutdown(wait=False, cancel_futures=True)
        try:
            with ThreadPoolExecutor(max_workers=max(1, len(copies)), thread_name_prefix="env-close") as closer:
                list(closer.map(lambda copy: copy.close(), copies))
        finally:
            self.env_pool.shutdown(wait=False, cancel_futures=True)
            self.record_pool.shutdown(wait=True)  # what was handed to it is written before the writer closes


__all__ = ["EpisodeEngine", "run_async", "run_coroutine"]
