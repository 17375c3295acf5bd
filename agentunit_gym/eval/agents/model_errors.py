"""How a model endpoint fails: the typed errors of :mod:`~agentunit_gym.eval.agents.model_client`, and
the reading of a refusal that means the conversation outgrew the model's context window.

A context overflow raises :class:`~agentunit_gym.errors.AgentContextLimitError` (the evaluator
ends the episode as CLE); any other refusal that retrying cannot fix raises
:class:`ModelAPIError`; an endpoint that stayed down through a turn's retries raises
:class:`EndpointUnavailableError` (the episode is recorded as ``endpoint_error``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from agentunit_gym.errors import AgentUnitError

if TYPE_CHECKING:
    from agentunit_gym.eval.agents.model_config import OpenAIConfig

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Statuses under 500 that are worth retrying (as the SDK's own policy has it); every 5xx is too."""


class ModelAPIError(AgentUnitError, RuntimeError):
    """The model endpoint failed for good: retries spent, deadline passed, or a non-retryable status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class EndpointUnavailableError(ModelAPIError):
    """The endpoint stayed unavailable through a turn's retries: refused connections, timeouts,
    5xx or 429 until the retries or the deadline ran out. Not the agent's failure: the
    evaluator records the episode as ``endpoint_error`` (left out of the metrics, rerun by
    ``--resume``) and probes the endpoint before it runs more episodes.

    Attributes:
        config: the endpoint's config, to probe it with.
    """

    def __init__(self, message: str, config: OpenAIConfig) -> None:
        super().__init__(message)
        self.config = config


CONTEXT_LIMIT_STATUSES = frozenset({400, 413})
"""HTTP statuses with which servers refuse a conversation that does not fit the model."""

CONTEXT_LIMIT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
"""``error.code`` / ``error.type`` values that mean a context overflow: OpenAI's code, and
the type of llama.cpp's server."""

CONTEXT_LIMIT_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    # OpenAI (older models) and vLLM: "This model's maximum context length is 4096 tokens. However, ..."
    r"maximum context length",
    # "context length exceeded", "context window exceeded"
    r"context (?:length|window|size) (?:is |was |has been )?exceeded",
    # OpenAI: "Your input exceeds the context window of this model";
    # llama.cpp: "the request exceeds the available context size" / "request (4476 tokens) exceeds ..."
    r"exceed(?:s|ed)? the (?:available |maximum |model's )?context (?:length|window|size)",
    # vLLM: "Input prompt (5000 tokens) is too long and exceeds limit of 4096";
    # Anthropic-compatible endpoints: "prompt is too long: 210000 tokens > 200000 maximum"
    r"(?:prompt|input)(?: \(\d+ tokens\))? is too long",
    # vLLM: "The decoder prompt (length 5000) is longer than the maximum model length of 4096"
    r"longer than the maximum model length",
    r"too many tokens",
))
"""Messages that mean a context overflow, as OpenAI, vLLM, llama.cpp's server and
Anthropic-compatible endpoints phrase it (matched case-insensitively, anywhere in the message)."""


def context_limit_message(status: int, body: str) -> str | None:
    """The server's words if a refusal says the conversation exceeds the model's context window.

    A context overflow is a 400 or 413 whose JSON error has a code or type in
    :data:`CONTEXT_LIMIT_CODES`, or whose message (the body itself when it is not JSON)
    matches one of :data:`CONTEXT_LIMIT_PATTERNS`. Any other refusal is not one.

    Args:
        status: the HTTP status.
        body: the response body.

    Returns:
        The server's message (at most 300 characters), or None when this is not a context overflow.
    """
    if status not in CONTEXT_LIMIT_STATUSES:
        return None
    message, codes = error_fields(body)
    if codes & CONTEXT_LIMIT_CODES or any(p.search(message) for p in CONTEXT_LIMIT_PATTERNS):
        return message[:300]
    return None


def error_fields(body: str) -> tuple[str, set[str]]:
    """The message and the code/type strings of an error body, across the shapes servers use:
    ``{"error": {"message", "code", "type"}}`` (OpenAI, llama.cpp), ``{"message", "type",
    "code"}`` (older vLLM), ``{"error": "..."}`` and ``{"detail": "..."}``."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip(), set()
    if not isinstance(data, dict):
        return body.strip(), set()
    error = data.get("error", data)
    if not isinstance(error, dict):
        return str(error), set()
    message = error.get("message", error.get("detail", data.get("detail")))
    codes = {str(error[k]) for k in ("code", "type") if error.get(k) is not None}
    return (str(message) if message is not None else body.strip()), codes


_VALIDATION_ERROR = re.compile(r"validation error.*\(\s*'body'", re.IGNORECASE | re.DOTALL)


def is_request_validation_error(status: int, body: str) -> bool:
    """Whether a 500 is the server's report that the request itself did not validate.

    llama-cpp-python's server answers a request field it does not take (an OpenAI
    ``response_format`` of type ``json_schema``) with a 500 whose message is FastAPI's
    validation error (``1 validation error: {... 'loc': ('body', 'response_format', 'type') ...}``).
    That is the client's request at fault, not a server failure: sending it again cannot help,
    so it is not retried (the caller sees a :class:`ModelAPIError` with status 500).
    """
    return status == 500 and bool(_VALIDATION_ERROR.search(error_fields(body)[0]))


__all__ = ["CONTEXT_LIMIT_CODES", "CONTEXT_LIMIT_PATTERNS", "CONTEXT_LIMIT_STATUSES", "RETRYABLE_STATUSES",
           "EndpointUnavailableError", "ModelAPIError", "context_limit_message", "error_fields",
           "is_request_validation_error"]
