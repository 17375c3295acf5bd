"""What the episode engine and the Ray driver share: an episode slot, the record sink,
and how a finished, failed or abandoned episode becomes a record."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import AgentContextLimitError, EndpointDownError, EndpointError, RunStoppedError
from agentunit_gym.eval.agents.builtin import Agent
from agentunit_gym.eval.agents.model_client import EndpointUnavailableError
from agentunit_gym.eval.plan.work import WorkItem
from agentunit_gym.eval.record.records import EpisodeRecord, RecordWriter
from agentunit_gym.eval.run.schedule import Abort, Packet

ProgressFn = Callable[[EpisodeRecord, int, int], None]
"""Called after each episode with (record, episodes done, episodes planned)."""

WorkQueue = deque[tuple[WorkItem, int]]
"""Work items waiting to run, each with its attempt number (1 for a first try)."""


STOP_AFTER_FAILURES = 5
"""Episodes that must have failed for one reason before a run can be stopped early."""

STOP_SHARE = 0.8
"""Share of the finished episodes that must have failed for that one reason."""


ENDPOINT_PROBE_DELAYS_S: tuple[float, ...] = (2.0, 4.0, 8.0, 16.0, 30.0)
"""The pauses before each probe of a model endpoint that went away (the first probe is at once)."""

ENDPOINT_PROBE_DEADLINE_S = 90.0
"""How long the run waits, probing, for a model endpoint to come back before it stops."""

ENDPOINT_PROBE_TIMEOUT_S = 10.0
"""The deadline of one probe (``GET <base-url>/models``)."""


def probe_endpoint(probe: Callable[[float], None], delays: tuple[float, ...] = ENDPOINT_PROBE_DELAYS_S,
                   deadline_s: float = ENDPOINT_PROBE_DEADLINE_S) -> str | None:
    """Probe an endpoint until it answers: at once, then after each of ``delays``, within ``deadline_s``.

    Args:
        probe: sends one probe with the given timeout; raises ``EndpointError`` when the endpoint
            does not answer.
        delays: the pauses between probes (a backoff).
        deadline_s: the probing stops when this much time has passed.

    Returns:
        None when a probe was answered; else the last probe's error.
    """
    end = time.monotonic() + deadline_s
    last = "no probe was sent"
    for pause in (0.0, *delays):
        remaining = end - time.monotonic()
        if pause >= remaining:
            break
        time.sleep(pause)
        try:
            probe(min(ENDPOINT_PROBE_TIMEOUT_S, max(0.1, end - time.monotonic())))
            return None
        except EndpointError as exc:
            last = str(exc)
    return last


def _probe_openai(error: EndpointUnavailableError) -> Callable[[float], None]:
    from agentunit_gym.eval.agents.openai_agent import check_openai_endpoint

    return lambda timeout: check_openai_endpoint(error.config, timeout)


def failure_reason(record: EpisodeRecord) -> str | None:
    """The reason an episode failed on infrastructure or the agent's endpoint, None when it ran."""
    if record.status not in ("agent_error", "endpoint_error", "infra_error") or not record.error:
        return None
    return record.error.splitlines()[0]


class RecordSink:
    """Writes each finished episode (record and trace), reports progress, and stops a run
    whose episodes mostly fail for the same reason (a dead endpoint, a stopped daemon):
    after :data:`STOP_AFTER_FAILURES` such failures that make up :data:`STOP_SHARE` of the
    episodes this run finished, it raises :class:`~agentunit_gym.errors.RunStoppedError`.

    An episode whose model endpoint went away (:meth:`endpoint_failed`) pauses the run while
    the endpoint is probed (:func:`probe_endpoint`); if it does not come back the run stops
    with :class:`~agentunit_gym.errors.EndpointDownError` instead of recording every
    remaining episode as an error."""

    def __init__(self, writer: RecordWriter, done: int, total: int, progress: ProgressFn | None) -> None:
        self.writer = writer
        self.done = done
        self.total = total
        self.progress = progress
        self.written: list[EpisodeRecord] = []
        self._failures: dict[str, int] = {}

    def endpoint_failed(self, error: EndpointUnavailableError) -> None:
        """The model endpoint failed an episode: probe it (the run waits); stop the run when it stays down.

        Raises:
            EndpointDownError: no probe was answered within the deadline.
        """
        last = probe_endpoint(_probe_openai(error), ENDPOINT_PROBE_DELAYS_S, ENDPOINT_PROBE_DEADLINE_S)
        if last is None:
            return
        lost = sum(1 for r in self.written if r.status == "endpoint_error")
        raise EndpointDownError(
            f"the model endpoint {error.config.base_url} went away and did not come back within "
            f"{ENDPOINT_PROBE_DEADLINE_S:g} s of probes (last: {last[:300]}). The {len(self.written)} episodes "
            f"finished are saved; {lost} cut short by the endpoint are recorded as endpoint_error, left out of the "
            "metrics, and run again by --resume. Restart the model server, then resume.")

    def record(self, record: EpisodeRecord, trace: EpisodeTrace | None) -> None:
        self.recorded(self.writer.write(record, trace))

    async def record_off_loop(self, record: EpisodeRecord, trace: EpisodeTrace | None, pool: Executor) -> None:
        """:meth:`record`, with the files written on ``pool`` (one thread: in the order asked)
        while the event loop goes on with the other episodes; returns once they are flushed.

        A caller cancelled meanwhile (Ctrl-C, another episode's error) does not stop the
        write: a finished episode is never lost (the pool's shutdown waits for it), though it
        is then not counted here.

        Raises:
            OSError: the files could not be written.
            RunStoppedError: most finished episodes failed for the same reason.
        """
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        future = pool.submit(self.writer.write, record, trace)

        def settle(_: object) -> None:
            if not waiter.done():
                waiter.set_result(None)

        def done(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run ended, nobody waits
                loop.call_soon_threadsafe(settle, None)

        future.add_done_callback(done)
        await waiter
        self.recorded(future.result())

    def recorded(self, record: EpisodeRecord) -> None:
        """Count ``record``, written already (:meth:`RecordWriter.write`), and report it.

        Raises:
            RunStoppedError: most finished episodes failed for the same reason.
        """
        self.written.append(record)
        self.done += 1
        if self.progress is not None:
            self.progress(record, self.done, self.total)
        reason = failure_reason(record)
        if reason is not None:
            count = self._failures[reason] = self._failures.get(reason, 0) + 1
            if count >= STOP_AFTER_FAILURES and count >= STOP_SHARE * len(self.written):
                raise RunStoppedError(
                    f"stopped early: {count} of the {len(self.written)} episodes finished so far failed for the "
                    f"same reason: {reason[:300]}. The {len(self.written)} finished episodes are saved."
                )


@dataclass
class Slot:
    """One episode in flight: its agent, work item, and what the agent sees next."""

    agent: Agent
    item: WorkItem | None = None
    attempts: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    deadline: float = 0.0
    started: float = 0.0
    abort: Abort | None = None
    """Set when the episode is to end without another step (the agent failed, or ran out of time)."""
    agent_error: str = ""
    endpoint_error: EndpointUnavailableError | None = None
    """Set when the agent's model endpoint went away during the episode (status ``endpoint_error``)."""

    def start(self, item: WorkItem, attempts: int, timeout_s: float) -> None:
        self.item, self.attempts = item, attempts
        self.info, self.observation, self.abort, self.agent_error = {}, "", None, ""
        self.endpoint_error = None
        self.started = time.time()
        self.deadline = self.started + timeout_s


def agent_failure(slot: Slot, exc: Exception) -> Abort:
    """How ``slot``'s episode ends after its agent raised ``exc``.

    A context overflow ends the episode as CLE (AgentBench's agent context limit): the
    record stays ``done``. A model endpoint that stayed unavailable is not the agent's failure:
    ``endpoint_error``. Anything else is an agent error, recorded as such and never retried.
    """
    if isinstance(exc, AgentContextLimitError):
        return Abort(FinishReason.CONTEXT_LIMIT, f"agent context limit: {exc}")
    if isinstance(exc, EndpointUnavailableError):
        slot.endpoint_error = exc
        slot.agent_error = f"{type(exc).__name__}: {exc}"
        return Abort(FinishReason.ERROR, f"model endpoint unavailable: {exc}")
    slot.agent_error = f"{type(exc).__name__}: {exc}"
    return Abort(FinishReason.ERROR, f"agent failed: {slot.agent_error}")


def agent_timeout(timeout_s: float) -> Abort:
    return Abort(FinishReason.TASK_LIMIT, f"wall-clock limit {timeout_s:g} s reached while the agent was replying")


def finish(slot: Slot, packet: Packet, agent_label: str, sink: RecordSink) -> None:
    """Record ``slot``'s finished episode from its last packet, and free the slot."""
    sink.record(*finished_record(slot, packet, agent_label))
    release(slot, sink)


def release(slot: Slot, sink: RecordSink) -> None:
    """Free ``slot`` once its episode is recorded; an episode the model endpoint failed
    probes the endpoint first (:meth:`RecordSink.endpoint_failed`)."""
    slot.item = None
    if slot.endpoint_error is not None:
        error, slot.endpoint_error = slot.endpoint_error, None
        sink.endpoint_failed(error)


def finished_record(slot: Slot, packet: Packet, agent_label: str) -> tuple[EpisodeRecord, EpisodeTrace | None]:
    """The record and trace of ``slot``'s finished episode, from its last packet."""
    assert slot.item is not None
    trace = packet.trace
    if trace is not None and (trace.env_id is None or trace.seed is None):
        trace = trace.model_copy(update={"env_id": trace.env_id or slot.item.env_id,
                                         "seed": trace.seed if trace.seed is not None else slot.item.seed})
    score = trace.score if trace is not None else None
    record = EpisodeRecord(
        key=slot.item.key, env_id=slot.item.env_id, task_id=slot.item.task_id, run=slot.item.run,
        seed=slot.item.seed, agent=agent_label,
        status="endpoint_error" if slot.endpoint_error else "agent_error" if slot.agent_error else "done",
        attempts=slot.attempts, success=bool(score and score.success), reward=float(score.reward if score else 0.0),
        finish_reason=trace.finish_reason.value if trace is not None and trace.finish_reason else None,
        steps=len(trace.steps) if trace is not None else 0, wall_s=time.time() - slot.started,
        error=slot.agent_error, split=trace.split if trace is not None else "",
        backend=trace.backend if trace is not None else "",
    )
    return record, trace


def retry_or_record(slot: Slot, error: str, queue: WorkQueue, max_retries: int, agent_label: str,
                    sink: RecordSink) -> None:
    """An infrastructure failure: queue the episode again (first in line), or record it once
    its retries are spent; free the slot."""
    assert slot.item is not None
    retry_or_record_item(slot.item, slot.attempts, error, queue, max_retries, agent_label, sink)
    slot.item = None


def retry_or_record_item(item: WorkItem, attempts: int, error: str, queue: WorkQueue, max_retries: int,
                         agent_label: str, sink: RecordSink) -> None:
    """``item``'s attempt number ``attempts`` failed on infrastructure: queue it again (first
    in line), or record it as ``infra_error`` once its retries are spent."""
    if attempts <= max_retries:
        queue.appendleft((item, attempts + 1))
    else:
        sink.record(EpisodeRecord(key=item.key, env_id=item.env_id, task_id=item.task_id, run=item.run,
                                  seed=item.seed, agent=agent_label, status="infra_error", attempts=attempts,
                                  finish_reason=FinishReason.ERROR.value, error=error), None)


def record_task_error(slot: Slot, error: str, agent_label: str, sink: RecordSink) -> None:
    """The task failed on this backend (its reference does not run there): record it, never
    retry it, free the slot; the run goes on."""
    assert slot.item is not None
    it = slot.item
    sink.record(EpisodeRecord(key=it.key, env_id=it.env_id, task_id=it.task_id, run=it.run, seed=it.seed,
                              agent=agent_label, status="task_error", attempts=slot.attempts,
                              finish_reason=FinishReason.ERROR.value, wall_s=time.time() - slot.started,
                              error=error), None)
    slot.item = None


__all__ = ["ENDPOINT_PROBE_DEADLINE_S", "ENDPOINT_PROBE_DELAYS_S", "ProgressFn", "RecordSink", "Slot", "WorkQueue",
           "agent_failure", "agent_timeout", "finish", "finished_record", "probe_endpoint", "record_task_error",
           "release", "retry_or_record", "retry_or_record_item"]
