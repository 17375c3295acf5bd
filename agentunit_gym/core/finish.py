"""How an episode ended: one enum shared by envs, wrappers, the evaluator and reports; the turn limit."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from agentunit_gym.errors import ConfigError


class FinishReason(str, Enum):
    """Why an episode ended, in AgentBench's classes.

    ``COMPLETE``: the agent committed (answer, finish, buy). ``CONTEXT_LIMIT`` (CLE): the
    conversation no longer fits the agent's context. ``INVALID_FORMAT`` (IF): the reply does
    not follow the grammar. ``INVALID_ACTION`` (IA): well formed, but not a valid action.
    ``TASK_LIMIT`` (TLE): step limit, time limit or a loop. ``ERROR``: infrastructure.
    """

    COMPLETE = "complete"
    CONTEXT_LIMIT = "context_limit"
    INVALID_FORMAT = "invalid_format"
    INVALID_ACTION = "invalid_action"
    TASK_LIMIT = "task_limit"
    ERROR = "error"

    @property
    def abbreviation(self) -> str:
        """The short label used in AgentBench's tables (``CLE``, ``IF``, ``IA``, ``TLE``)."""
        return _ABBREVIATIONS[self]


_ABBREVIATIONS = {
    FinishReason.COMPLETE: "Complete",
    FinishReason.CONTEXT_LIMIT: "CLE",
    FinishReason.INVALID_FORMAT: "IF",
    FinishReason.INVALID_ACTION: "IA",
    FinishReason.TASK_LIMIT: "TLE",
    FinishReason.ERROR: "Error",
}


class LimitKind(str, Enum):
    """Which limit ended a ``TASK_LIMIT`` episode, in ``info["limit"]`` and the trace."""

    STEPS = "steps"
    """The turn limit (the env's, or ``LimitEpisode``'s, or ``gym.make(max_episode_steps=N)``)."""
    TIME = "time"
    """The wall-clock limit per episode."""
    LOOP = "loop"
    """The same action repeated (``DetectLoops(on_loop="end")``)."""


@dataclass(frozen=True)
class StepLimit:
    """Where an env's turn limit comes from: ``max_steps=`` given to the env, a cap from
    ``gym.make(..., max_episode_steps=N)`` (``AgentEnv.cap_steps``), the task's, the domain's."""

    default: int
    """The domain's limit (AgentBench's)."""
    given: int | None = None
    """``max_steps=`` given to the env."""
    cap: int | None = None
    """The ``TimeLimit``'s ``max_episode_steps``."""

    def __post_init__(self) -> None:
        if self.given is not None and self.given < 1:
            raise ConfigError(f"max_steps must be at least 1, got {self.given}.")

    def of(self, task_limit: int | None) -> int:
        """The limit in force for a task whose own limit is ``task_limit`` (None: it has none, or
        no task): a cap replaces the task's and the domain's and lowers ``max_steps=``; without a
        cap, ``max_steps=``, else the task's, else the domain's."""
        if self.cap is not None:
            return self.cap if self.given is None else min(self.given, self.cap)
        if self.given is not None:
            return self.given
        return task_limit if task_limit is not None else self.default
