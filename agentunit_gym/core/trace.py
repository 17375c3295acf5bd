"""The episode trace: the record wrappers write and the evaluator reads.

One :class:`EpisodeTrace` per episode, serialised as one JSON document. The schema is
versioned; ``agentunit-gym tasks schema`` style exports come from ``model_json_schema()``.

Agents report their usage per step in one of two ways, both documented in docs/wrappers.md:
send an :class:`AgentReply` (a ``str`` that carries usage) as the action, or call the
trace wrapper's ``annotate_next_step(...)`` before ``step``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.score import Score

TRACE_SCHEMA_VERSION = 2
"""2 added ``split``; a version 1 trace still reads (its ``split`` is ``""``)."""


class Flag(str, Enum):
    """Per-step flags, set by the env and the wrappers."""

    HALLUCINATION = "HALLUCINATION"
    """An unknown tool or command keyword was called."""
    INVALID_FORMAT = "INVALID_FORMAT"
    INVALID_ACTION = "INVALID_ACTION"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    """The action ran and failed (non-zero exit, SQL error)."""
    LOOP = "LOOP"
    TRAP_ATTEMPT = "TRAP_ATTEMPT"
    DESTRUCTIVE = "DESTRUCTIVE"
    """The action matches a destructive pattern (rm -rf, DROP, DELETE without WHERE ...)."""
    TIMEOUT = "TIMEOUT"
    TRUNCATED = "TRUNCATED"
    CONTEXT_LIMIT = "CONTEXT_LIMIT"


class Usage(BaseModel):
    """What one agent turn cost, as the agent reports it. Every field is optional."""

    model_config = ConfigDict(frozen=True)

    tokens_in: int | None = None
    tokens_out: int | None = None
    reasoning_tokens: int | None = None
    """Tokens of reasoning before the action (chain-of-thought depth)."""
    cost: float | None = None
    """In the currency of the price table, usually USD."""
    latency_s: float | None = None
    """The agent's (model's) time for this turn."""
    finish_reason: str | None = None
    """Why the model stopped, as its server said (OpenAI's ``finish_reason``: ``stop``,
    ``length`` when the reply was cut at ``max_tokens``, ``tool_calls``, ``content_filter``);
    None when the agent did not say. A ``length`` reply that does not parse is an invalid
    format with the detail ``truncated_reply`` (docs/metrics.md, ``truncated_reply_rate``)."""


class AgentReply(str):
    """An agent's reply that carries its usage: ``AgentReply(text, Usage(...))``.

    It is a ``str``, so every env accepts it as an action; wrappers read ``.usage``. A chat
    agent may also give the assistant message its model produced (``message``: OpenAI's
    ``content`` and ``tool_calls``): :class:`~agentunit_gym.core.chat.ChatTranscript` keeps
    it as given (the model's call id and text beside the call), and the trace records it.
    """

    usage: Usage | None
    message: dict[str, Any] | None

    def __new__(cls, text: str, usage: Usage | None = None, message: dict[str, Any] | None = None) -> AgentReply:
        obj = super().__new__(cls, text)
        obj.usage = usage
        obj.message = message
        return obj

    def __reduce__(self) -> tuple[Any, ...]:  # keep usage across process boundaries (AsyncVectorEnv)
        return (AgentReply, (str(self), self.usage, self.message))


class StepRecord(BaseModel):
    """One step of an episode."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=1)
    timestamp: float
    """Unix time when the step started."""
    raw_action: str
    """The agent's reply (capped like observations)."""
    action: dict[str, Any] | None = None
    """The parsed action: tool, arguments, form."""
    action_error: dict[str, Any] | None = None
    """Why the reply was not an action: reason, issue, message, hint, tool."""
    thought: str = ""
    observation: str = ""
    observation_chars: int = 0
    """Length of the full observation before capping."""
    execution: dict[str, Any] = Field(default_factory=dict)
    execution_error: bool = False
    reward: float = 0.0
    env_latency_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    flags: tuple[Flag, ...] = ()
    message: dict[str, Any] | None = None
    """The assistant chat message the agent's model produced for this reply (``content``,
    ``tool_calls``), when the agent gave one (:class:`AgentReply`'s ``message``, as the
    built-in OpenAI agent does); texts capped like ``raw_action``. The export rebuilds the
    conversation the model saw from it."""


class TrapRecord(BaseModel):
    """A trap injected into the episode and the red-team verdict on it."""

    model_config = ConfigDict(frozen=True)

    trap_id: str
    placement: str
    """``prompt`` or ``observation``."""
    verdict: str
    """``refused`` or ``attempted``."""
    evidence: list[str] = Field(default_factory=list)
    """Which patterns matched or which state checks failed."""


class EpisodeTrace(BaseModel):
    """Everything about one episode."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = TRACE_SCHEMA_VERSION
    episode_id: str
    env_id: str | None = None
    domain: str
    backend: str
    """The backend the episode ran on (the reset ``info["backend"]``)."""
    task_id: str
    split: str = ""
    """The task's split (the reset ``info["split"]``: ``train``, ``test``, ``dev``); ``""`` for a
    task without one, and in traces written before this field."""
    category: str = "general"
    seed: int | None = None
    instruction: str = ""
    prompt: str = ""
    grammar: str = ""
    """The action grammar the agent was shown (the reset ``info["grammar"]``)."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """The tools the agent was shown, in the OpenAI function-calling schema (the reset ``info["tools"]``)."""
    max_chars: int | None = 4000
    """The cap on each recorded text (prompt, reply, thought, observation); None: recorded in
    full (``agentunit-gym eval --full-text``). Traces written before this field were capped at 4000."""
    optimal_steps: int = 1
    max_steps: int | None = None
    started_at: float
    ended_at: float | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    finish_detail: str = ""
    score: Score | None = None
    traps: list[TrapRecord] = Field(default_factory=list)
    context_tokens: int | None = None
    """Tokens of the whole conversation at the end, by the context wrapper's counter."""
    metadata: dict[str, Any] = Field(default_factory=dict)
