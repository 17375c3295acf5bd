"""Record one :class:`~agentunit_gym.core.trace.EpisodeTrace` per episode, and write it as JSON."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, SupportsFloat, TypeGuard

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.score import Score
from agentunit_gym.core.text import cap_text
from agentunit_gym.core.trace import AgentReply, EpisodeTrace, StepRecord, TrapRecord, Usage
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.base import EpisodeWrapper, Layer
from agentunit_gym.wrappers.info import agent_env, derive_flags, jsonable, reset_info, step_info, unique
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo

TRACE_NOTE = "\n[... {omitted} more characters not recorded]"
"""What a trace shows after text cut at ``max_chars`` (see :func:`~agentunit_gym.core.text.cap_text`)."""


class RecordTrace(EpisodeWrapper, gym.utils.RecordConstructorArgs):
    """Build the episode's trace step by step; on the final step put it in ``info["trace"]``
    and, when ``directory`` is given, write it to ``<directory>/<task_id>--<episode_id>.json``.

    Per step it records the timestamp, the raw reply and the parsed action (or why it was
    not one), the observation (capped), the env's latency, the agent's usage and the flags
    (from ``info["flags"]`` that the other wrappers set, plus those that follow from the
    env's ``info``). Agents report usage either by sending an
    :class:`~agentunit_gym.core.trace.AgentReply` as the action or by calling
    :meth:`annotate_next_step` before ``step``; when the agent reports no latency, the
    time between the previous observation and this reply is recorded as ``latency_s``.
    Put this wrapper outermost so it sees what the agent sees.

    Example:
        >>> import tempfile, gymnasium as gym
        >>> from pathlib import Path
        >>> folder = tempfile.TemporaryDirectory()
        >>> env = RecordTrace(gym.make("AgentUnit/DB-v0", backend="sqlite"), directory=folder.name)
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> env.annotate_next_step(tokens_in=812, tokens_out=40, cost=0.0012)
        >>> obs, r, term, trunc, info = env.step('Action: Answer\\nFinal Answer: ["-3.2"]')
        >>> trace = info["trace"]  # an EpisodeTrace, also env.last_trace()
        >>> trace.finish_reason.abbreviation, trace.score.success, trace.steps[0].usage.tokens_in
        ('Complete', True, 812)
        >>> [path.suffix for path in Path(folder.name).iterdir()]  # written as JSON
        ['.json']
        >>> env.close(); folder.cleanup()

    Args:
        env: a stack over an AgentUnit env.
        directory: where to write the JSON documents; None keeps them in memory only.
        env_id: the id recorded in traces (defaults to the env spec's id).
        max_chars: cap on each recorded observation, reply and prompt; None records them in full.
        metadata: extra fields copied into every trace (run id, agent name ...).

    Raises:
        ConfigError: ``max_chars`` below 1.
    """

    layer = Layer.TRACE

    def __init__(self, env: gym.Env[str, str], directory: str | Path | None = None, env_id: str | None = None,
                 max_chars: int | None = 4000, metadata: dict[str, Any] | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, directory=directory, env_id=env_id, max_chars=max_chars,
                                                 metadata=metadata)
        EpisodeWrapper.__init__(self, env)
        agent_env(env)
        if max_chars is not None and max_chars < 1:
            raise ConfigError(f"max_chars must be at least 1 (or None for full text), got {max_chars!r}.")
        self.directory = Path(directory) if directory is not None else None
        # The base env's spec, not the wrapper's: Wrapper.spec rebuilds the spec stack and
        # deep-copies every make() argument (a task list costs ~1 s to copy).
        base_spec = env.unwrapped.spec
        spec_id = base_spec.id if base_spec is not None else None
        self.env_id = env_id or spec_id
        self.max_chars = max_chars
        self.metadata = jsonable(dict(metadata or {}))
        self._trace: EpisodeTrace | None = None
        self._steps: list[StepRecord] = []
        self._pending: Usage | None = None
        self._ready_at = 0.0
        self._done = False
        self.written: list[Path] = []
        """Files written so far, in order."""

    # ---------------------------------------------------------------- hooks

    def annotate_next_step(self, *, tokens_in: int | None = None, tokens_out: int | None = None,
                           reasoning_tokens: int | None = None, cost: float | None = None,
                           latency_s: float | None = None) -> None:
        """Report the agent's usage for the reply about to be sent with ``step``.

        Fields given here win over the same fields of an ``AgentReply``'s usage.
        """
        self._pending = Usage(tokens_in=tokens_in, tokens_out=tokens_out, reasoning_tokens=reasoning_tokens,
                              cost=cost, latency_s=latency_s)

    def current_trace(self) -> EpisodeTrace | None:
        """The trace of the running (or last) episode, with the steps so far."""
        if self._trace is None:
            return None
        return self._trace.model_copy(update={"steps": list(self._steps)})

    def last_trace(self) -> EpisodeTrace | None:
        """Alias of :meth:`current_trace`, reads better after an episode ended."""
        return self.current_trace()

    # ------------------------------------------------------------------ API

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, WrappedResetInfo]:
        abandoned = self._trace is not None and not self._done and bool(self._steps)
        observation, raw = self.env.reset(seed=seed, options=options)  # a refused reset changes nothing here
        if abandoned:
            # The previous episode was abandoned mid-way: keep what happened.
            self._finish({"finish_detail": "abandoned: reset before the episode ended"})
        info = reset_info(raw)
        base = agent_env(self.env)
        task = base.task
        self._steps = []
        self._pending = None
        self._done = False
        self._trace = new_trace(
            observation, info, episode_id=uuid.uuid4().hex, env_id=self.env_id, domain=base.domain,
            backend=str(info.get("backend", base.backend_name)), task_id=task.id if task else "", seed=seed,
            max_chars=self.max_chars, metadata=self.metadata,
        )
        self._ready_at = time.monotonic()
        return observation, info

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        usage = self._usage_for(action)
        started_wall = time.time()
        started = time.monotonic()
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        env_latency = time.monotonic() - started
        timing = info.get("timing")
        if timing is not None and hasattr(timing, "env_s"):
            env_latency = float(timing.env_s)  # the env's own measure, without wrapper overhead
        record = step_record(len(self._steps) + 1, action, observation, float(reward), info, usage=usage,
                             env_latency_s=env_latency, timestamp=started_wall, max_chars=self.max_chars)
        self._steps.append(record)
        if terminated or truncated:
            info = self.on_episode_end(info)
        self._ready_at = time.monotonic()
        return observation, reward, terminated, truncated, info

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Finish the trace from the end ``info``, write it when there is a directory, and put
        it in ``info["trace"]``. Called by ``step`` on the final step and by
        :func:`~agentunit_gym.wrappers.ending.end_episode` for an episode ended outside ``step``.
        """
        info["trace"] = self._finish(info)
        return info

    # -------------------------------------------------------------- private

    def _usage_for(self, action: str) -> Usage:
        reported = action.usage if isinstance(action, AgentReply) and action.usage is not None else Usage()
        if self._pending is not None:
            given = {k: v for k, v in self._pending.model_dump().items() if v is not None}
            reported = reported.model_copy(update=given)
            self._pending = None
        if reported.latency_s is None:
            reported = reported.model_copy(update={"latency_s": max(0.0, time.monotonic() - self._ready_at)})
        return reported

    def _finish(self, info: Mapping[str, Any]) -> EpisodeTrace:
        assert self._trace is not None  # reset() made it
        self._done = True
        trace = finished_trace(self._trace, self._steps, info)
        self._trace = trace
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{trace.task_id}--{trace.episode_id}.json"
            path.write_text(trace.model_dump_json(indent=2), encoding="utf-8")
            self.written.append(path)
        return trace


# ------------------------------------------------------------ the trace builder
# Pure functions, shared by RecordTrace and the evaluator's scheduler (for stacks without
# RecordTrace), so a trace reads the same whoever built it.


def new_trace(observation: str, info: Mapping[str, Any], *, episode_id: str, env_id: str | None, domain: str,
              backend: str, task_id: str, seed: int | None, max_chars: int | None,
              metadata: dict[str, Any] | None = None) -> EpisodeTrace:
    """The trace of an episode that just started, from its reset ``observation`` and ``info``.

    ``task_id`` is used when ``info`` has none; the task's split is ``info["split"]``.
    """
    return EpisodeTrace(
        episode_id=episode_id,
        env_id=env_id,
        domain=domain,
        backend=backend,
        task_id=str(info.get("task_id", task_id)),
        split=str(info.get("split") or ""),
        category=str(info.get("category", "general")),
        seed=seed,
        instruction=str(info.get("instruction", "")),
        prompt=_cap(str(observation), max_chars),
        grammar=str(info.get("grammar") or ""),
        tools=jsonable(list(info.get("tools") or [])),
        max_chars=max_chars,
        optimal_steps=int(info.get("optimal_steps") or 1),
        max_steps=_int_or_none(info.get("step_limit", info.get("max_steps"))),
        started_at=time.time(),
        metadata=dict(metadata or {}),
    )


def step_record(index: int, action: str, observation: str, reward: float, info: Mapping[str, Any], *, usage: Usage,
                env_latency_s: float, timestamp: float, max_chars: int | None) -> StepRecord:
    """One step of a trace from what ``step`` returned: texts capped at ``max_chars``, the flags
    the wrappers set in ``info["flags"]`` merged with those that follow from the env's ``info``."""
    return StepRecord(
        index=index,
        timestamp=timestamp,
        raw_action=_cap(str(action), max_chars),
        # An empty dict is the env's "none" (info keys keep one type for vector envs).
        action=jsonable(info["action"]) if _filled(info.get("action")) else None,
        action_error=jsonable(info["action_error"]) if _filled(info.get("action_error")) else None,
        thought=_cap(str(info.get("thought") or ""), max_chars),
        observation=_cap(str(observation), max_chars),
        observation_chars=len(observation),
        execution=jsonable(info.get("execution") or {}),
        execution_error=bool(info.get("execution_error")),
        reward=reward,
        env_latency_s=env_latency_s,
        usage=usage,
        flags=unique([*(info.get("flags") or []), *derive_flags(info)]),
        message=_capped_message(action, max_chars),
    )


def _cap(text: str, max_chars: int | None) -> str:
    return text if max_chars is None else cap_text(text, max_chars, TRACE_NOTE)


def _capped_message(action: str, max_chars: int | None) -> dict[str, Any] | None:
    """The model's assistant message an ``AgentReply`` carries, its content and call arguments capped."""
    message = action.message if isinstance(action, AgentReply) else None
    if not isinstance(message, dict):
        return None
    kept: dict[str, Any] = jsonable(dict(message))
    if isinstance(kept.get("content"), str):
        kept["content"] = _cap(kept["content"], max_chars)
    for call in kept.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            function["arguments"] = _cap(function["arguments"], max_chars)
    return kept


def finished_trace(trace: EpisodeTrace, steps: list[StepRecord], info: Mapping[str, Any]) -> EpisodeTrace:
    """``trace`` completed with its ``steps`` and the end ``info`` (finish reason and detail,
    score, trap verdict, context count, limit details), validated once as a whole."""
    finish = info.get("finish_reason")
    score = info.get("score")
    if _filled(score):
        score = Score.model_validate(score)
    trap = info.get("trap")
    traps = []
    if _filled(trap):
        traps.append(TrapRecord(trap_id=str(trap["trap_id"]), placement=str(trap["placement"]),
                                verdict=str(trap["verdict"]), evidence=[str(e) for e in trap.get("evidence", [])]))
    metadata = dict(trace.metadata)
    for key in ("limit", "loop_count", "invalid_count", "context_counter"):
        if info.get(key) not in (None, ""):
            metadata[key] = jsonable(info[key])
    if _filled(trap):
        metadata["trap_category"] = trap.get("category")
        metadata["trap_delivered"] = trap.get("delivered")
    done = trace.model_copy(update={
        "steps": list(steps),
        "ended_at": time.time(),
        "finish_reason": FinishReason(finish) if finish else None,
        "finish_detail": str(info.get("finish_detail", "")),
        "score": score if isinstance(score, Score) else None,
        "traps": traps,
        "context_tokens": _int_or_none(info.get("context_tokens")),
        "metadata": metadata,
    })
    # Validate the assembled document once, so a bad value fails here and not in a reader.
    return EpisodeTrace.model_validate(done.model_dump())


def _filled(value: Any) -> TypeGuard[dict[str, Any]]:
    """A dict with something in it: ``{}`` is how ``info`` says "none" (one type per key)."""
    return isinstance(value, dict) and bool(value)


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


__all__ = ["TRACE_NOTE", "RecordTrace", "finished_trace", "new_trace", "step_record"]
