"""How an episode ended: one enum shared by envs, wrappers, the evaluator and reports."""

from __future__ import annotations

from enum import Enum


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
