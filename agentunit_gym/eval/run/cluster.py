"""Episodes on a Ray cluster: ``agentunit-gym eval --ray ADDRESS``.

The driver (the process running ``eval``) plans the run and writes every record, as a local
run does; the episodes run on the cluster's nodes:

- One actor per live node that has CPUs (:class:`~agentunit_gym.eval.run.cluster_node.NodeEpisodes`,
  pinned to its node with a hard node-affinity strategy). It makes its env copies there, from the run's config with
  the same routing as a local run (:func:`~agentunit_gym.eval.run.runner.env_options`), so an
  episode uses that node's backends (its Docker daemon, its local sandbox, its database).
  The agent acts in the actor, next to the env: the built-in agents and an
  OpenAI-compatible one (an HTTP client) run on any node.
- ``--concurrency C`` is the total in flight across the cluster: each actor has
  ``ceil(C / nodes)`` slots and the driver keeps at most C episodes in flight, each sent to
  the actor with the most free slots.
- An actor runs one episode per call on the evaluator's own episode engine
  (:meth:`~agentunit_gym.eval.run.engine.EpisodeEngine.run_queue`, infrastructure retries included) and
  returns its record and trace; the driver writes them (``episodes.jsonl``, ``traces/``),
  with the node's id in the record's ``node`` field.
- A node lost mid-run (its actor dies, or a call outlives every deadline): its unfinished
  episodes go back to the queue through the infrastructure-retry path
  (:func:`~agentunit_gym.eval.run.slots.retry_or_record_item`) and run on the other nodes. An
  episode is recorded only when its result reaches the driver, once per key: a late result
  for a key already recorded is dropped.

Every wait on Ray has a deadline; a ``HOST:PORT`` where nothing answers raises
:class:`~agentunit_gym.errors.BackendUnavailableError` within
:data:`~agentunit_gym.eval.run.deadlines.PROBE_TIMEOUT_S` (connecting: :mod:`agentunit_gym.eval.run.cluster_connect`;
every deadline: :mod:`agentunit_gym.eval.run.deadlines`).
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agentunit_gym.errors import AgentUnitError, BackendUnavailableError, ConfigError
from agentunit_gym.eval.agents.builtin import AgentFactory
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import EnvFactory
from agentunit_gym.eval.plan.work import LeftOut, WorkItem
from agentunit_gym.eval.run.cluster_connect import check_address, connect, import_ray
from agentunit_gym.eval.run.cluster_node import EpisodeOutcome, NodeEpisodes
from agentunit_gym.eval.run.deadlines import (
    ACTOR_START_TIMEOUT_S,
    CLOSE_TIMEOUT_S,
    ENV_SETUP_S,
    POLL_S,
    PROBE_TIMEOUT_S,
    episode_call_timeout,
)
from agentunit_gym.eval.run.schedule import INFRA_ERRORS
from agentunit_gym.eval.run.slots import RecordSink, WorkQueue, retry_or_record_item

_LOG = logging.getLogger("agentunit_gym")


def connect_cluster(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> RayEpisodes:
    """Connect to the cluster at ``address`` and return the runner :func:`~agentunit_gym.eval.evaluate.evaluate`
    takes as ``remote``.

    Raises:
        ConfigError, MissingDependencyError, BackendUnavailableError: see :func:`connect`.
    """
    return RayEpisodes(address, disconnect=connect(address, timeout_s))


@dataclass
class _Worker:
    actor: Any
    node: str
    slots: int
    busy: int = 0
    alive: bool = True


@dataclass
class _InFlight:
    worker: _Worker
    item: WorkItem
    attempts: int
    started: float = field(default_factory=time.monotonic)


class RayEpisodes:
    """Runs a run's episodes on the Ray cluster this process is connected to (see the module
    docstring); :func:`connect_cluster` makes one. Implements
    :class:`~agentunit_gym.eval.run.runner.RemoteEpisodes`."""

    def __init__(self, address: str, *, disconnect: bool = True) -> None:
        self.address = address
        self._disconnect = disconnect  # close() disconnects: the connection was made for the run
        self._workers: list[_Worker] = []
        self._config: EvalConfig | None = None
        self._label = ""
        self._closed = False

    def node_count(self) -> int:
        """The live nodes with CPUs: the nodes a run started now gets an actor on."""
        return len(_worker_nodes(import_ray()))

    @property
    def nodes(self) -> list[str]:
        """The ids of the nodes with a live actor."""
        return [w.node for w in self._workers if w.alive]

    def start(self, config: EvalConfig, agent_factory: AgentFactory, agent_label: str,
              env_factory: EnvFactory) -> None:
        """Start one actor per live node with CPUs and wait (with a deadline) until they answer.

        Raises:
            ConfigError: ``config.vector`` is set (the copies live on the nodes, not in vector envs here).
            BackendUnavailableError: no node has CPUs, or no actor started in time.
        """
        ray = import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if config.vector is not None:
            raise ConfigError("--ray makes the env copies on the cluster's nodes; --vector (where the copies live "
                              "in this process) cannot be combined with it.")
        self._config, self._label = config, agent_label
        nodes = _worker_nodes(ray)
        if not nodes:
            raise BackendUnavailableError(f"the Ray cluster at {self.address} has no live node with CPUs.")
        slots = math.ceil(config.concurrency / len(nodes))
        _ship_user_agents(ray)
        actor_class = ray.remote(NodeEpisodes)
        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0,
                                   "max_concurrency": slots + 4}
        env_vars = _forwarded_env(config)
        if env_vars:
            options["runtime_env"] = {"env_vars": env_vars}
        pending: dict[Any, Any] = {}
        for node in nodes:
            actor = actor_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False), **options,
            ).remote(config, agent_factory, agent_label, env_factory, slots)
            pending[actor.node_id.remote()] = actor
        ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=ACTOR_START_TIMEOUT_S)
        for ref in ready:
            try:
                node_id = ray.get(ref, timeout=POLL_S + 10)
            except ray.exceptions.RayError as exc:
                _LOG.warning("a Ray node is left out of the run: its actor failed to start: %s", exc)
                continue
            self._workers.append(_Worker(pending[ref], str(node_id), slots))
        for ref in late:
            _LOG.warning("a Ray node is left out of the run: its actor did not start within %g s",
                         ACTOR_START_TIMEOUT_S)
            ray.kill(pending[ref], no_restart=True)
        if not self._workers:
            raise BackendUnavailableError(f"no actor of the run started on the Ray cluster at {self.address} "
                                          f"within {ACTOR_START_TIMEOUT_S:g} s; see the cluster's logs.")

    def list_tasks(self, env_id: str) -> tuple[list[tuple[str, str]], list[LeftOut], str | None]:
        """Listed on the first node that answers.

        Raises:
            BackendUnavailableError: no node could make the env.
        """
        ray = import_ray()
        errors: list[str] = []
        for worker in [w for w in self._workers if w.alive]:
            try:
                tasks, left_out, note = ray.get(worker.actor.list_tasks.remote(env_id), timeout=ENV_SETUP_S)
                return list(tasks), list(left_out), note
            except ray.exceptions.RayTaskError as exc:
                _raise_unless_infra(exc)
                errors.append(f"{worker.node[:12]}: {_cause(exc)}")
            except ray.exceptions.RayError as exc:  # the actor died or did not answer in time
                self._lose(worker, exc)
                errors.append(f"{worker.node[:12]}: {type(exc).__name__}: {exc}")
        raise BackendUnavailableError(f"no Ray node could make {env_id}: {'; '.join(errors) or 'no live node'}")

    def run(self, items: list[WorkItem], sink: RecordSink) -> float:
        """Run ``items`` over the actors; each result is recorded through ``sink`` once.

        Returns:
            The seconds the nodes spent making envs (summed over nodes).

        Raises:
            BackendUnavailableError: every node was lost with episodes left to run.
            AgentUnitError: an error of the run itself raised on a node (a bad option).
        """
        ray = import_ray()
        assert self._config is not None, "start() first"
        config = self._config
        queue: WorkQueue = deque((it, 1) for it in items)
        recorded: set[str] = set()
        inflight: dict[Any, _InFlight] = {}
        setup_s = 0.0
        # A call may run the episode and its retries on that node, after making an env.
        overdue_s = (config.max_infra_retries + 1) * episode_call_timeout(config.episode_timeout_s) + ENV_SETUP_S
        while queue or inflight:
            self._dispatch(queue, inflight, recorded)
            if not inflight:
                if not queue:
                    break
                raise BackendUnavailableError(
                    f"every node of the Ray cluster at {self.address} was lost; {len(queue)} episode(s) were not "
                    "run. The finished ones are saved: rerun with --resume once the cluster is back.")
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
            for ref in ready:
                job = inflight.pop(ref)
                job.worker.busy -= 1
                try:
                    outcome: EpisodeOutcome = ray.get(ref, timeout=POLL_S + 10)
                except ray.exceptions.RayTaskError as exc:
                    _raise_unless_infra(exc)
                    self._retry(job.item, job.attempts, f"on Ray node {job.worker.node}: {_cause(exc)}", queue,
                                recorded, sink)
                    continue
                except ray.exceptions.RayError as exc:  # the node or its actor is gone
                    self._lose(job.worker, exc)
                    self._retry(job.item, job.attempts, f"Ray node {job.worker.node} lost: {type(exc).__name__}",
                                queue, recorded, sink)
                    continue
                setup_s += outcome.setup_s
                if outcome.failure:
                    self._retry(job.item, outcome.attempts, f"on Ray node {outcome.node}: {outcome.failure}",
                                queue, recorded, sink)
                    continue
                for record, trace in outcome.records:
                    if record.key in recorded:  # a late duplicate (the item ran twice): the first one counts
                        continue
                    recorded.add(record.key)
                    sink.record(record.model_copy(update={"node": outcome.node}), trace)
            now = time.monotonic()
            for ref, job in list(inflight.items()):
                if now - job.started > overdue_s:
                    # Stuck past every limit: give up on that actor; its other calls fail and are retried.
                    inflight.pop(ref)
                    job.worker.busy -= 1
                    self._lose(job.worker, TimeoutError(f"no result within {overdue_s:g} s"))
                    self._retry(job.item, job.attempts, f"Ray node {job.worker.node}: no result within "
                                f"{overdue_s:g} s", queue, recorded, sink)
        return setup_s

    def _dispatch(self, queue: WorkQueue, inflight: dict[Any, _InFlight], recorded: set[str]) -> None:
        assert self._config is not None
        while queue and len(inflight) < self._config.concurrency:
            free = [w for w in self._workers if w.alive and w.busy < w.slots]
            if not free:
                return
            worker = max(free, key=lambda w: w.slots - w.busy)
            item, attempts = queue.popleft()
            if item.key in recorded:
                continue
            worker.busy += 1
            inflight[worker.actor.run.remote(item, attempts)] = _InFlight(worker, item, attempts)

    def _retry(self, item: WorkItem, attempts: int, error: str, queue: WorkQueue, recorded: set[str],
               sink: RecordSink) -> None:
        """The infrastructure-retry path, for an item whose node failed it; never for one already recorded."""
        assert self._config is not None
        if item.key in recorded:
            return
        _LOG.warning("%s: %s; retrying it", item.key, error)
        before = len(sink.written)
        retry_or_record_item(item, attempts, error, queue, self._config.max_infra_retries, self._label, sink)
        if len(sink.written) > before:
            recorded.add(item.key)

    def _lose(self, worker: _Worker, exc: BaseException) -> None:
        if not worker.alive:
            return
        worker.alive = False
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _LOG.warning("Ray node %s lost (%s: %s); its episodes run on the other nodes", worker.node,
                     type(exc).__name__, first_line)
        ray = import_ray()
        try:
            ray.kill(worker.actor, no_restart=True)
        except ray.exceptions.RayError:
            pass

    def close(self) -> None:
        """Close the actors' envs (with a deadline), end the actors, and disconnect (when
        :func:`connect_cluster` connected)."""
        if self._closed:
            return
        self._closed = True
        ray = import_ray()
        if not ray.is_initialized():
            return
        alive = [w for w in self._workers if w.alive]
        refs = [w.actor.close.remote() for w in alive]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        for worker in self._workers:
            try:
                ray.kill(worker.actor, no_restart=True)
            except ray.exceptions.RayError:
                pass
        self._workers.clear()
        if self._disconnect:
            ray.shutdown()


def _worker_nodes(ray: Any) -> list[dict[str, Any]]:
    """The live nodes with CPUs (a head started with ``--num-cpus=0`` is kept free of episodes)."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(exc).__name__}: {exc}"


def _raise_unless_infra(exc: BaseException) -> None:
    """Re-raise the run's own error carried by a Ray task error (a bad option fails the run
    as it would locally); return for an infrastructure error, which is retried."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, INFRA_ERRORS):
        return
    if isinstance(cause, AgentUnitError):
        raise cause
    raise AgentUnitError(f"an episode failed on a Ray node: {_cause(exc)}") from exc


def _ship_user_agents(ray: Any) -> None:
    """Agents loaded from a file (``--agent ./my_agent.py:Agent``) live in a module the nodes
    cannot import by name: their code travels by value instead."""
    for name, module in list(sys.modules.items()):
        if name.startswith("_agentunit_user_agent_") and module is not None:
            ray.cloudpickle.register_pickle_by_value(module)


def _forwarded_env(config: EvalConfig) -> dict[str, str]:
    """The variable holding an ``openai:`` agent's key, when set here, so the nodes' agents can read it."""
    if not config.agent.startswith("openai:"):
        return {}
    name = str(config.agent_settings.get("api_key_env") or "OPENAI_API_KEY")
    return {name: os.environ[name]} if name in os.environ else {}


__all__ = ["PROBE_TIMEOUT_S", "EpisodeOutcome", "NodeEpisodes", "RayEpisodes", "check_address", "connect",
           "connect_cluster", "import_ray"]
