"""An agent backed by any OpenAI-compatible chat-completions endpoint.

Two ways to talk to the env:

- ``mode="react"`` (default): an AgentBench-style prompt for the domain (the env's grammar
  plus one worked example as prior turns), the model's text is the action.
- ``mode="tools"``: native tool calling with the env's tool schemas (``info["tools"]``);
  the model's tool call is sent to the env as a JSON call, the observation comes back as
  the tool's result.

Asynchronous: ``act`` is ``async def``, so the evaluator keeps hundreds of turns in flight
from one event loop. Every request goes through :class:`~agentunit_gym.eval.agents.model_client.ModelClient`
(the ``openai`` SDK; the same client the judge uses): retries with backoff on 429, 5xx and
connection failures within a deadline per turn, one rate gate per endpoint (``max_rps``, and
a 429's ``Retry-After`` holds every episode's requests), a context-window refusal raised as
:class:`~agentunit_gym.errors.AgentContextLimitError` (the evaluator ends the episode as CLE),
tokens from the response's ``usage`` and cost from the price table.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from agentunit_gym.core.chat import GENERIC_INTRO, ChatTranscript, example_turns, system_prompt
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import EndpointError
from agentunit_gym.eval.agents.model_client import (
    DEFAULT_PRICES,
    ModelAPIError,
    ModelClient,
    OpenAIConfig,
    context_limit_message,
    load_price_table,
)

# ---------------------------------------------------------------- the agent


class OpenAIChatAgent:
    """A chat model behind an OpenAI-compatible endpoint, one request per turn.

    Args:
        config: endpoint, model, prompting mode, retry policy and prices.

    Raises:
        ConfigError: no API key for a remote endpoint.
    """

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        self.client = ModelClient(config)
        self.chat = ChatTranscript(config.mode)
        """The conversation so far (``chat.messages``), built by the same
        :class:`~agentunit_gym.core.chat.ChatTranscript` as the ``ChatMessages`` wrapper and the export."""
        self._tools: list[dict[str, Any]] = []

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages sent with the next request (the last request's, plus the model's reply)."""
        return self.chat.messages

    def reset(self, info: dict[str, Any]) -> None:
        """Start a new conversation for the task in ``info``."""
        self._tools = list(info.get("tools") or [])
        self.chat = ChatTranscript(self.config.mode)
        self.chat.start(info)

    async def act(self, observation: str, info: dict[str, Any]) -> str:
        """Send the observation, return the model's action with its usage (a coroutine).

        The reply is an :class:`~agentunit_gym.core.trace.AgentReply` carrying the usage and
        the model's assistant message (``message``), so a wrapper or a trace rebuilds the
        conversation exactly.

        Raises:
            AgentContextLimitError: the endpoint refused the turn because the conversation
                exceeds the model's context window (never retried).
            ModelAPIError: the endpoint kept failing until the retries or the deadline ran out,
                or answered with a status that retrying cannot fix (400, 401, 404 ...).
        """
        if not self.chat.messages:
            self.reset(info)
        self.chat.add_observation(observation)
        started = time.perf_counter()
        tools = self._tools if self.config.mode == "tools" else None
        completion = await self.client.complete(self.chat.messages, tools=tools)
        # The turn's latency includes retries and waits, as the agent's time in the trace should.
        usage = completion.usage.model_copy(update={"latency_s": time.perf_counter() - started,
                                                    "finish_reason": completion.finish_reason})
        action, message = _to_action(completion.message)
        reply = AgentReply(action, usage, message)
        self.chat.add_reply(reply)
        return reply


def _to_action(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The env action of a model's message and the assistant message to keep in the conversation:
    the first tool call as a JSON call (later calls are dropped, one action a turn), else the text."""
    calls = message.get("tool_calls") or []
    content = message.get("content") or ""
    if calls:
        call = calls[0]
        function = call.get("function") or {}
        kept = {"role": "assistant", "content": content or None, "tool_calls": [call]}
        raw_args = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
        except ValueError:
            # Hand the broken JSON to the env: it classifies it as an invalid format.
            return '{"name": ' + json.dumps(function.get("name", "")) + ', "arguments": ' + str(raw_args) + "}", kept
        return json.dumps({"name": function.get("name", ""), "arguments": arguments}), kept
    return str(content), {"role": "assistant", "content": content}


ENDPOINT_CHECK_TIMEOUT_S = 10.0
"""Deadline of the one request :func:`check_openai_endpoint` sends."""


def check_openai_endpoint(config: OpenAIConfig, timeout_s: float = ENDPOINT_CHECK_TIMEOUT_S) -> None:
    """Send one cheap request (``GET <base_url>/models``) and fail when the endpoint does not work.

    Any HTTP answer proves the server is there (a server without ``/models`` answers 404 or
    405, which is fine); a refused connection, an unknown host, a timeout, or a 401/403
    (the key is refused) is an error naming the URL. Called once before the first episode,
    so a run against a dead endpoint stops in seconds instead of recording every episode as
    an error.

    Raises:
        EndpointError: the endpoint does not answer, or refuses the key.
    """
    url = config.base_url.rstrip("/") + "/models"
    headers: dict[str, str] = {}
    key = config.api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        status, body = _get(request, timeout_s)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(
            f"the model endpoint {config.base_url} does not answer ({type(exc).__name__}: {reason}). "
            "Start the server, or fix --base-url (it ends in /v1 for most servers)."
        ) from exc
    if status in (401, 403):
        raise EndpointError(
            f"the model endpoint {config.base_url} refused the key (HTTP {status}: {body[:200]}). "
            f"Check ${config.api_key_env}, or name another variable with --api-key-env."
        )


def _get(request: urllib.request.Request, timeout: float) -> tuple[int, str]:
    """One blocking request of the endpoint check: ``(status, body)``; an HTTP error status is
    returned, a connection failure raises. (The check asks whether the server answers at all,
    before any SDK client is made; model calls go through :mod:`~agentunit_gym.eval.agents.model_client`.)"""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return int(resp.status), resp.read(65536).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(65536).decode("utf-8", "replace")


__all__ = ["DEFAULT_PRICES", "GENERIC_INTRO", "ModelAPIError", "OpenAIChatAgent", "OpenAIConfig",
           "check_openai_endpoint", "context_limit_message", "example_turns", "load_price_table", "system_prompt"]
