"""The actor of ``eval --ray`` on one node (:class:`NodeEpisodes`) and what it sends back
(:class:`EpisodeOutcome`); the driver's side is :mod:`agentunit_gym.eval.run.cluster`.

Nothing here imports ray at module level: the class becomes an actor when the driver wraps
it with ``ray.remote``, and Ray imports this module on each node by name.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass

from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.agents.builtin import Agent, AgentFactory
from agentunit_gym.eval.agents.model_client import EndpointUnavailableError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import EnvFactory
from agentunit_gym.eval.plan.work import LeftOut, WorkItem, left_out, left_out_tasks, list_tasks
from agentunit_gym.eval.record.records import EpisodeRecord
from agentunit_gym.eval.run.copies import hosted_copy
from agentunit_gym.eval.run.engine import EpisodeEngine
from agentunit_gym.eval.run.runner import env_options
from agentunit_gym.eval.run.schedule import INFRA_ERRORS, ScheduleEpisodes
from agentunit_gym.eval.run.slots import RecordSink, Slot, WorkQueue


class _CollectRecords(RecordSink):
    """A sink that keeps the records for the driver instead of writing them."""

    def __init__(self) -> None:  # no writer: nothing is written on a node
        self.items: list[tuple[EpisodeRecord, EpisodeTrace | None]] = []

    def record(self, record: EpisodeRecord, trace: EpisodeTrace | None) -> None:
        self.items.append((record, trace))

    async def record_off_loop(self, record: EpisodeRecord, trace: EpisodeTrace | None, pool: Executor) -> None:
        self.record(record, trace)  # kept in memory: nothing to write, nothing to take off the loop

    def endpoint_failed(self, error: EndpointUnavailableError) -> None:
        """No probe on a node: the driver gets the ``endpoint_error`` record, and its sink's
        early stop (the same failure on most episodes) ends a run whose endpoint stays down."""


@dataclass
class EpisodeOutcome:
    """What an actor sends back for one work item."""

    key: str
    node: str
    records: list[tuple[EpisodeRecord, EpisodeTrace | None]]
    attempts: int
    failure: str = ""
    """Set when the node could not run the item (an env that could not be made, a stuck
    backend): no record, the driver retries it elsewhere."""
    setup_s: float = 0.0


class NodeEpisodes:
    """The actor on one node: the episode engine (:class:`~agentunit_gym.eval.run.engine.EpisodeEngine`)
    with ``slots`` workers, env copies on that node's backends, agents beside them. Each
    :meth:`run` call is one work item: a free copy of its env (made on first need) and a
    free agent take it through :meth:`EpisodeEngine.run_queue`, infrastructure retries
    included (Ray runs up to ``slots`` calls at once on the actor's event loop)."""

    def __init__(self, config: EvalConfig, agent_factory: AgentFactory, agent_label: str,
                 env_factory: EnvFactory, slots: int) -> None:
        import ray

        self.node = str(ray.get_runtime_context().get_node_id())
        self._config = config
        self._env_factory = env_factory
        # Two env threads beyond the slots: a task listing, a copy being made.
        self._engine = EpisodeEngine(config, agent_factory, agent_label, slots + 2)
        self._free: dict[str, list[ScheduleEpisodes]] = {}
        self._all: list[ScheduleEpisodes] = []
        self._agents: list[Agent] = []

    def node_id(self) -> str:
        return self.node

    async def list_tasks(self, env_id: str) -> tuple[list[tuple[str, str]], list[LeftOut], str | None]:
        copy, _ = await self._checkout(env_id)
        try:
            return list_tasks(copy), left_out_tasks(env_id, copy), left_out(copy)
        finally:
            self._free[env_id].append(copy)

    async def run(self, item: WorkItem, attempts: int) -> EpisodeOutcome:
        try:
            copy, setup_s = await self._checkout(item.env_id)
        except INFRA_ERRORS as exc:
            return EpisodeOutcome(item.key, self.node, [], attempts, failure=f"{type(exc).__name__}: {exc}")
        slot = Slot(agent=self._agents.pop() if self._agents else self._engine.agent_factory())
        sink = _CollectRecords()
        queue: WorkQueue = deque([(item, attempts)])
        try:
            await self._engine.run_queue(queue, copy, slot, sink)
        except BackendTimeoutError as exc:  # the copy is stuck: leave it, the driver retries the item
            self._all.remove(copy)
            return EpisodeOutcome(item.key, self.node, [], slot.attempts, failure=f"{type(exc).__name__}: {exc}",
                                  setup_s=setup_s)
        self._free[item.env_id].append(copy)
        self._agents.append(slot.agent)
        return EpisodeOutcome(item.key, self.node, sink.items, slot.attempts, setup_s=setup_s)

    async def _checkout(self, env_id: str) -> tuple[ScheduleEpisodes, float]:
        """A free copy of ``env_id`` (made, and its backend started, when there is none), and the seconds that took."""
        free = self._free.setdefault(env_id, [])
        if free:
            return free.pop(), 0.0
        started = time.perf_counter()
        options = env_options(self._config, env_id)
        copy = await asyncio.get_running_loop().run_in_executor(
            self._engine.env_pool,
            lambda: hosted_copy(lambda: self._env_factory(env_id, dict(options)), env_id, warm=True))
        self._all.append(copy)
        return copy, time.perf_counter() - started

    def close(self) -> None:
        self._engine.close(self._all)
        self._all.clear()
        self._free.clear()


__all__ = ["EpisodeOutcome", "NodeEpisodes"]
