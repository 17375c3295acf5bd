"""The one client for every model call: agents and judges alike.

It wraps the ``openai`` SDK (``AsyncOpenAI`` for the evaluator's episodes and the judge,
``OpenAI`` for synchronous callers) and keeps one policy for all of them:

- ``base_url`` reaches any OpenAI-compatible server; a loopback endpoint needs no key
  (no ``Authorization`` header is sent), a remote one needs the variable ``api_key_env``
  (:mod:`~agentunit_gym.eval.agents.model_config`).
- The SDK's per-request timeout (``request_timeout_s``) and its typed errors are used; the
  retries are :mod:`~agentunit_gym.eval.agents.retry_policy`'s (``tenacity``; the SDK's own retries
  are off), one policy for the sync and the async path, because two things must hold over
  every episode of the process, not one request: a 429's ``Retry-After`` pauses the
  endpoint's shared :class:`~agentunit_gym.eval.agents.ratelimit.RateGate` (every caller waits it
  out), and one deadline (``turn_deadline_s``) bounds all the attempts of a turn.
- A refusal because the conversation outgrew the model's context window raises
  :class:`~agentunit_gym.errors.AgentContextLimitError` at once (the evaluator ends the
  episode as CLE); any other 4xx raises :class:`ModelAPIError` at once
  (:mod:`~agentunit_gym.eval.agents.model_errors`).
- Usage (tokens, reasoning tokens) comes from the response; cost from a price table (USD per
  million tokens) the user can extend.

Example (against the package's fake endpoint on loopback; ``OpenAIConfig(model="gpt-4o-mini")``
reaches OpenAI's, with the key from ``$OPENAI_API_KEY``):

    >>> import asyncio
    >>> from agentunit_gym.eval.agents.fake_server import FakeChatServer
    >>> with FakeChatServer(lambda body: {"role": "assistant", "content": "42"}) as server:
    ...     client = ModelClient(OpenAIConfig(model="fake", base_url=server.base_url))
    ...     completion = asyncio.run(client.complete([{"role": "user", "content": "Say 42"}]))
    ...     again = client.complete_sync([{"role": "user", "content": "Say 42"}])   # for synchronous callers
    >>> completion.text, again.text, completion.usage.tokens_out, completion.usage.cost   # no price for "fake"
    ('42', '42', 1, None)
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentunit_gym.core.trace import Usage
from agentunit_gym.errors import MissingDependencyError
from agentunit_gym.eval.agents.model_config import (
    DEFAULT_PRICES,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_TURN_DEADLINE_S,
    LOOPBACK_HOSTS,
    OpenAIConfig,
    load_price_table,
    parse_model_args,
)
from agentunit_gym.eval.agents.model_errors import (
    RETRYABLE_STATUSES,
    EndpointUnavailableError,
    ModelAPIError,
    context_limit_message,
)
from agentunit_gym.eval.agents.ratelimit import RateGate, endpoint_gate
from agentunit_gym.eval.agents.retry_policy import RetryPolicy

if TYPE_CHECKING:
    import openai

def _openai() -> Any:
    """The ``openai`` module.

    Raises:
        MissingDependencyError: the SDK is not installed (a ConfigError with the install line).
    """
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai", "Calling a model (openai: agents, the judge)") from exc
    return openai


_WARM = threading.Event()


def _warm_up() -> None:
    """Pay the SDK's one-time costs (lazy imports, model schemas: ~0.1-0.7 s here) when a client
    is made, not inside the first turn of an episode, where they would delay every caller."""
    openai = _openai()  # first: a missing SDK is said when a client is made, warm or not
    if _WARM.is_set():
        return
    _ = openai.AsyncOpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1", max_retries=0).chat.completions
    openai.types.chat.ChatCompletion.model_validate({
        "id": "warm-up", "object": "chat.completion", "created": 0, "model": "warm-up",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}]})
    _WARM.set()


@dataclass(frozen=True)
class Completion:
    """One model answer.

    Attributes:
        message: the assistant message as a plain dict (``role``, ``content``, ``tool_calls`` ...).
        usage: tokens, reasoning tokens, cost and the latency of the successful call.
        finish_reason: why the model stopped (``stop``, ``length``, ``tool_calls``, ``content_filter`` ...).
    """

    message: dict[str, Any]
    usage: Usage
    finish_reason: str | None = None

    @property
    def text(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def refusal(self) -> str | None:
        """The model's refusal text when it declined to answer (``message.refusal``)."""
        value = self.message.get("refusal")
        return str(value) if value else None


_ASYNC_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str | None, float], Any]] = (
    weakref.WeakKeyDictionary())
_SYNC_CLIENTS: dict[tuple[str, str | None, float], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client_kwargs(base_url: str, key: str | None, timeout: float) -> dict[str, Any]:
    # The SDK insists on a key; a keyless local server gets none on the wire (see ``_body``).
    return {"base_url": base_url, "timeout": timeout, "max_retries": 0, "api_key": key or "no-key"}


def wire_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: an assistant message that carries tool calls and no text goes
    with an empty ``content`` rather than ``null`` (the conversation keeps ``None``, the shape
    OpenAI answers with). OpenAI and vLLM take either; llama-cpp-python's server refuses
    ``null`` (it validates ``content`` as a string: a 500) and a missing ``content`` (its
    ``chatml-function-calling`` template reads it: a 500 too)."""
    sent = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") is None:
            message = {**message, "content": ""}
        sent.append(message)
    return sent


class ModelClient:
    """Chat completions against one OpenAI-compatible endpoint, under :class:`OpenAIConfig`'s policy.

    The SDK clients are shared: one ``AsyncOpenAI`` per (endpoint, key, timeout) and event
    loop (its connection pool belongs to the loop), one ``OpenAI`` per (endpoint, key, timeout).

    Args:
        config: endpoint, model, timeouts, retries, prices, rate limit.

    Raises:
        ConfigError: no API key for a remote endpoint; the SDK is missing.
    """

    def __init__(self, config: OpenAIConfig) -> None:
        _warm_up()
        self.config = config
        self._key = config.api_key()
        self._gate: RateGate = endpoint_gate(config.base_url, config.max_rps)
        self._client_key = (config.base_url.rstrip("/"), self._key, config.request_timeout_s)

    # ------------------------------------------------------------ clients

    def _async_client(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        with _CLIENTS_LOCK:
            clients = _ASYNC_CLIENTS.setdefault(loop, {})
            client = clients.get(self._client_key)
            if client is None:
                client = clients[self._client_key] = _openai().AsyncOpenAI(
                    **_client_kwargs(self._client_key[0], self._key, self.config.request_timeout_s))
            return client  # type: ignore[no-any-return]

    def _sync_client(self) -> openai.OpenAI:
        with _CLIENTS_LOCK:
            client = _SYNC_CLIENTS.get(self._client_key)
            if client is None:
                client = _SYNC_CLIENTS[self._client_key] = _openai().OpenAI(
                    **_client_kwargs(self._client_key[0], self._key, self.config.request_timeout_s))
            return client  # type: ignore[no-any-return]

    # ------------------------------------------------------------ calls

    def _body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
              extra: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.config.extra_body:
            body["extra_body"] = dict(self.config.extra_body)
        body.update({"model": self.config.model, "messages": wire_messages(messages),
                     "temperature": self.config.temperature, "max_tokens": self.config.max_tokens})
        if self.config.top_p is not None:
            body["top_p"] = self.config.top_p
        if tools:
            body["tools"] = list(tools)
            # OpenAI's default with tools, said explicitly: some servers (llama-cpp-python's
            # chatml-function-calling) ignore the tools unless a tool_choice is given.
            body["tool_choice"] = "auto"
        if not self._key:
            body["extra_headers"] = {"Authorization": _openai().Omit()}
        body.update(extra)
        return body

    async def complete(self, messages: Sequence[dict[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None,
                       **extra: Any) -> Completion:
        """One chat completion, retried under the policy (a coroutine).

        Args:
            messages: the conversation.
            tools: tool schemas (native tool calling), or None.
            **extra: more request fields (``temperature``, ``max_tokens``, ``response_format`` ...).

        Raises:
            AgentContextLimitError: the conversation exceeds the model's context window.
            EndpointUnavailableError: retries or the deadline ran out (a :class:`ModelAPIError`).
            ModelAPIError: a status retrying cannot fix.
        """
        body = self._body(messages, tools, extra)
        client = self._async_client()
        policy = RetryPolicy(self.config, self._gate)
        async for attempt in policy.async_retrying():
            with attempt:
                timeout = await policy.before_attempt()
                started = time.perf_counter()
                try:
                    response = await client.chat.completions.create(**body, timeout=timeout)
                    return self._completion(response, time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 - classified: retried, or raised as its typed error
                    raise policy.classify(exc, _openai()) from exc
        raise AssertionError("unreachable: the policy returns or raises")  # pragma: no cover

    def complete_sync(self, messages: Sequence[dict[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None,
                      **extra: Any) -> Completion:
        """:meth:`complete` for synchronous callers (the SDK's ``OpenAI`` client, the same policy).

        Raises:
            AgentContextLimitError: the conversation exceeds the model's context window.
            EndpointUnavailableError: retries or the deadline ran out (a :class:`ModelAPIError`).
            ModelAPIError: a status retrying cannot fix.
        """
        body = self._body(messages, tools, extra)
        client = self._sync_client()
        policy = RetryPolicy(self.config, self._gate)
        for attempt in policy.retrying():
            with attempt:
                timeout = policy.before_attempt_sync()
                started = time.perf_counter()
                try:
                    response = client.chat.completions.create(**body, timeout=timeout)
                    return self._completion(response, time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 - classified: retried, or raised as its typed error
                    raise policy.classify(exc, _openai()) from exc
        raise AssertionError("unreachable: the policy returns or raises")  # pragma: no cover

    # ------------------------------------------------------------ responses

    def _completion(self, response: Any, latency: float) -> Completion:
        if isinstance(response, str):  # the SDK hands back a body it could not parse as JSON
            raise ValueError(f"not a JSON completion: {response[:100]!r}")
        data = response.model_dump(exclude_none=True)
        choices = data.get("choices") or [{}]
        message = dict(choices[0].get("message") or {})
        return Completion(message, self.usage(data.get("usage") or {}, latency), choices[0].get("finish_reason"))

    def usage(self, usage: dict[str, Any], latency: float) -> Usage:
        """Tokens and cost of a response's ``usage`` block."""
        tokens_in = usage.get("prompt_tokens")
        tokens_out = usage.get("completion_tokens")
        details = usage.get("completion_tokens_details") or {}
        cost = None
        price = self.config.price()
        if price is not None and tokens_in is not None and tokens_out is not None:
            cost = (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
        return Usage(tokens_in=tokens_in, tokens_out=tokens_out, reasoning_tokens=details.get("reasoning_tokens"),
                     cost=cost, latency_s=latency)


__all__ = ["DEFAULT_PRICES", "DEFAULT_REQUEST_TIMEOUT_S", "DEFAULT_TURN_DEADLINE_S", "LOOPBACK_HOSTS",
           "RETRYABLE_STATUSES", "Completion", "EndpointUnavailableError", "ModelAPIError", "ModelClient",
           "OpenAIConfig", "context_limit_message", "load_price_table", "parse_model_args", "wire_messages"]
