"""The wrapper through which the evaluator drives one env copy: which task it runs next, an
episode ended from outside (an agent failure, a deadline), and one :class:`Packet` per reset
or step that never lets an infrastructure error escape.

Everything the engine tells a copy travels out of band, as attributes set before the call
(``VectorEnv.set_attr`` when the copy lives in a vector env, :mod:`agentunit_gym.eval.run.copies`):
:attr:`ScheduleEpisodes.assignment` before a reset, :attr:`ScheduleEpisodes.pending_abort`
before a step. The action stays the agent's reply and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, SupportsFloat, cast

import gymnasium as gym

from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.info import running_step_info
from agentunit_gym.core.trace import AgentReply, EpisodeTrace, StepRecord, Usage
from agentunit_gym.errors import (
    INFRA_ERRORS,
    AgentUnitError,
    EpisodeStateError,
    TaskFileError,
)
from agentunit_gym.eval.agents.info import (
    EvalResetInfo,
    EvalStepInfo,
    NoInfo,
    PacketInfo,
    eval_reset_info,
    eval_step_info,
)
from agentunit_gym.wrappers.keys import WrappedStepInfo
from agentunit_gym.wrappers.trace import finished_trace, new_trace, step_record

TASK_ERRORS: tuple[type[BaseException], ...] = (TaskFileError,)
"""Errors that are the task's fault (a reference solution that fails on this backend): the
episode is recorded as ``task_error``, never retried, and the run goes on."""

OBSERVATION_CAP = 4000
"""Characters of each observation and reply kept in a trace the scheduler builds itself."""


@dataclass(frozen=True)
class Assignment:
    """The episode a copy runs at its next reset."""

    task_id: str
    seed: int
    key: str
    """The work item's key, the trace's episode id."""
    reference: bool = False
    """Put the reference solution in the reset info (for agents that replay it)."""
    deadline: float | None = None
    """Wall-clock time (``time.time()``) past which a step ends the episode as TLE."""


@dataclass(frozen=True)
class Abort:
    """The evaluator ending a copy's running episode instead of stepping it."""

    reason: FinishReason
    detail: str


def _no_info() -> NoInfo:
    return {}


PacketKind = Literal["reset", "step", "idle", "infra_error", "task_error"]


@dataclass
class Packet:
    """What one copy reports to the runner after a reset or a step (opaque to gymnasium's
    info batching, which would otherwise split nested dicts into arrays).

    ``info`` is, by ``kind``: an :class:`~agentunit_gym.eval.agents.info.EvalResetInfo` (``reset``),
    an :class:`~agentunit_gym.eval.agents.info.EvalStepInfo` (``step``), else ``{}``; read it through
    :meth:`reset_info` and :meth:`step_info`, which check the kind.

    >>> Packet("idle").info, Packet("infra_error", error="BackendError: gone").error
    ({}, 'BackendError: gone')
    >>> Packet("idle").step_info()
    Traceback (most recent call last):
    ...
    agentunit_gym.errors.EpisodeStateError: a packet of kind 'idle' carries no step info (only a step packet does).
    """

    kind: PacketKind
    info: PacketInfo = field(default_factory=_no_info)
    trace: EpisodeTrace | None = None
    error: str = ""

    def reset_info(self) -> EvalResetInfo:
        """The reset ``info`` of a ``reset`` packet.

        Raises:
            EpisodeStateError: the packet is of another kind.
        """
        if self.kind != "reset":
            raise EpisodeStateError(f"a packet of kind {self.kind!r} carries no reset info (only a reset packet does).")
        return cast(EvalResetInfo, self.info)

    def step_info(self) -> EvalStepInfo:
        """The step ``info`` of a ``step`` packet.

        Raises:
            EpisodeStateError: the packet is of another kind.
        """
        if self.kind != "step":
            raise EpisodeStateError(f"a packet of kind {self.kind!r} carries no step info (only a step packet does).")
        return cast(EvalStepInfo, self.info)


StepResult = tuple[str, SupportsFloat, bool, bool, dict[str, Any]]


class ScheduleEpisodes(gym.Wrapper[str, str, str, str]):
    """Runs the episode the runner assigns, reports it as one :class:`Packet`, and never lets
    an infrastructure error escape into the vector env (which would stop every copy).

    Set :attr:`assignment` before a reset (None idles the copy) and, to end the running
    episode instead of stepping it, :attr:`pending_abort` before a step (or call
    :meth:`abort_episode`). The trace comes from ``info["trace"]`` when the stack records one
    (``RecordTrace``), else this wrapper builds one with the same trace builder.

    Example:
        >>> import agentunit_gym
        >>> env = ScheduleEpisodes(agentunit_gym.make_eval_env("AgentUnit/DB-v0", backend="sqlite"), "AgentUnit/DB-v0")
        >>> env.assignment = Assignment(task_id="db-weather-03", seed=1, key="k")
        >>> obs, info = env.reset()
        >>> info["packet"].kind, info["packet"].reset_info()["seed"]
        ('reset', 1)
        >>> env.pending_abort = Abort(FinishReason.TASK_LIMIT, "wall-clock limit reached")
        >>> obs, reward, terminated, truncated, info = env.step("")  # not run: the abort ends the episode
        >>> truncated, info["packet"].step_info()["aborted"], info["packet"].trace.finish_reason.abbreviation
        (True, True, 'TLE')
        >>> env.close()
    """

    def __init__(self, env: gym.Env[str, str], env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.assignment: Assignment | None = None
        self.pending_abort: Abort | None = None
        self._current: Assignment | None = None
        self._trace: EpisodeTrace | None = None
        self._steps: list[StepRecord] = []
        # A stack with its own wall-clock limit (LimitEpisode) ends late steps itself.
        self._stack_has_clock = _has_wall_clock_limit(env)

    def assign(self, assignment: Assignment | None) -> None:
        """The episode the next :meth:`reset` starts (None idles the copy)."""
        self.assignment = assignment

    def warm_up(self) -> None:
        """Start the env's backend now (a container, a server) rather than in its first
        episode, when the env can (``warm_up()`` on the base env); a no-op otherwise."""
        warm = getattr(self.env.unwrapped, "warm_up", None)
        if warm is not None:
            warm()

    @property
    def running(self) -> bool:
        """Whether the copy runs an assigned episode."""
        return self._current is not None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._current = self.assignment
        self.pending_abort = None
        self._steps = []
        if self._current is None:
            return "", {"packet": Packet("idle")}
        current = self._current
        try:
            obs, info = self.env.reset(seed=current.seed, options={"task_id": current.task_id})
            reference = self._reference_actions() if current.reference else None
        except INFRA_ERRORS as exc:
            self._current = None
            return "", {"packet": Packet("infra_error", error=f"{type(exc).__name__}: {exc}")}
        except TASK_ERRORS as exc:
            self._current = None
            return "", {"packet": Packet("task_error", error=f"{type(exc).__name__}: {exc}")}
        typed = eval_reset_info(info, current.seed, reference)
        self._trace = new_trace(
            obs, typed, episode_id=current.key, env_id=self.env_id, domain=str(info.get("domain", "")),
            backend=str(info.get("backend", "")), task_id=current.task_id, seed=current.seed,
            max_chars=OBSERVATION_CAP, metadata={"trace_source": "runner"},
        )
        return obs, {"packet": Packet("reset", info=typed)}

    def step(self, action: str) -> StepResult:
        if self._current is None:
            return "", 0.0, False, False, {"packet": Packet("idle")}
        if self.pending_abort is not None:
            abort, self.pending_abort = self.pending_abort, None
            return self.abort_episode(abort)
        deadline = self._current.deadline
        if deadline is not None and not self._stack_has_clock and time.time() > deadline:
            return self.abort_episode(Abort(FinishReason.TASK_LIMIT, "wall-clock limit reached"))
        started = time.time()
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except INFRA_ERRORS as exc:
            self._current = None
            return "", 0.0, True, False, {"packet": Packet("infra_error", error=f"{type(exc).__name__}: {exc}")}
        except TASK_ERRORS as exc:
            self._current = None
            return "", 0.0, True, False, {"packet": Packet("task_error", error=f"{type(exc).__name__}: {exc}")}
        timing = info.get("timing")
        usage = action.usage if isinstance(action, AgentReply) and action.usage is not None else Usage()
        self._steps.append(step_record(
            len(self._steps) + 1, action, obs, float(reward), info, usage=usage,
            env_latency_s=float(getattr(timing, "env_s", 0.0) or 0.0), timestamp=started, max_chars=OBSERVATION_CAP))
        trace = None
        if terminated or truncated:
            trace = info.get("trace")
            if not isinstance(trace, EpisodeTrace):
                trace = self._build_trace(info)
        return obs, reward, terminated, truncated, {"packet": Packet("step", info=eval_step_info(info, aborted=False),
                                                                     trace=trace)}

    def abort_episode(self, abort: Abort) -> StepResult:
        """End the running episode for ``abort.reason`` through the whole stack (so the trap
        verdict, the context count and the stack's own trace record it), as a truncated step."""
        from agentunit_gym.wrappers.ending import end_episode

        if self._current is None:
            return "", 0.0, False, False, {"packet": Packet("idle")}
        base = self.env.unwrapped
        reason, detail = abort.reason, abort.detail
        end: WrappedStepInfo | None = None
        if getattr(base, "finish_reason", None) is None and reason is not FinishReason.COMPLETE:
            try:
                end = end_episode(self.env, reason, detail=detail)
            except AgentUnitError as exc:
                detail = f"{detail}; ending the episode failed: {exc}"
        # No end from the stack (it had ended, or ending failed): every step key at its empty value.
        info = eval_step_info(dict(end) if end is not None else dict(self._empty_step_info()), aborted=True)
        info["finish_reason"], info["finish_detail"] = reason, detail
        trace = info.get("trace")
        if not isinstance(trace, EpisodeTrace):  # a custom stack without RecordTrace
            trace = self._build_trace(info)
        return "", 0.0, False, True, {"packet": Packet("step", info=info, trace=trace)}

    def _reference_actions(self) -> list[str]:
        """The running task's reference solution, each step as the agent would send it."""
        base = self.env.unwrapped
        if not isinstance(base, AgentEnv) or base.task is None:
            raise EpisodeStateError("the reference solution needs an AgentUnit env with a task: reset it first.")
        return [base.render_action(step) for step in base.task.reference_solution]

    def _empty_step_info(self) -> WrappedStepInfo:
        assert self._current is not None  # only called while an episode runs
        base = self.env.unwrapped
        if isinstance(base, AgentEnv):
            return cast(WrappedStepInfo, running_step_info(
                base.steps, self._current.task_id, base.max_steps, backend_limits_off=base.backend_limits_off))
        return cast(WrappedStepInfo, running_step_info(len(self._steps), self._current.task_id, 0))

    def _build_trace(self, info: Mapping[str, Any]) -> EpisodeTrace:
        assert self._trace is not None  # reset made it
        end = {**info, "finish_reason": info.get("finish_reason") or FinishReason.ERROR}
        return finished_trace(self._trace, self._steps, end)


def _has_wall_clock_limit(env: gym.Env[Any, Any]) -> bool:
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if getattr(current, "max_seconds", None) is not None:
            return True
        current = current.env
    return False


__all__ = ["INFRA_ERRORS", "Abort", "Assignment", "Packet", "PacketKind", "ScheduleEpisodes"]
