"""The one client for every model call: agents and judges alike.

It wraps the ``openai`` SDK (``AsyncOpenAI`` for the evaluator's episodes and the judge,
``OpenAI`` for synchronous callers) and keeps one policy for all of them:

- ``base_url`` reaches any OpenAI-compatible server; a loopback endpoint needs no key
  (no ``Authorization`` header is sent), a remote one needs the variable ``api_key_env``.
- The SDK's per-request timeout (``request_timeout_s``) and its typed errors
  (``APIStatusError``, ``APIConnectionError``, ``APITimeoutError``) are used; the retry loop
  is ours (the SDK's own retries are off) because two things must hold over every episode
  of the process, not one request: a 429's ``Retry-After`` pauses the endpoint's shared
  :class:`~agentunit_gym.eval.ratelimit.RateGate` (every caller waits it out), and one
  deadline (``turn_deadline_s``) bounds all the attempts of a turn. 429, 408, 409, 5xx,
  connection failures and timeouts are retried with full-jitter exponential backoff.
- A refusal because the conversation outgrew the model's context window raises
  :class:`~agentunit_gym.errors.AgentContextLimitError` at once (the evaluator ends the
  episode as CLE); any other 4xx raises :class:`ModelAPIError` at once.
- Usage (tokens, reasoning tokens) comes from the response; cost from a price table (USD per
  million tokens) the user can extend.

Example::

    client = ModelClient(OpenAIConfig(model="gpt-4o-mini"))
    completion = await client.complete([{"role": "user", "content": "Say 42"}])
    completion.text, completion.usage.cost
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import threading
import time
import urllib.parse
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentunit_gym.core.trace import Usage
from agentunit_gym.errors import AgentContextLimitError, AgentUnitError, ConfigError
from agentunit_gym.eval.ratelimit import RateGate, endpoint_gate

if TYPE_CHECKING:
    import openai

OPENAI_HINT = 'pip install "agentunit-gym[openai]"'
"""How to install the SDK when it is missing."""

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
}
"""USD per million (input, output) tokens, for models whose list price was public when written.

Extend it with ``OpenAIConfig(prices=...)`` or ``--prices FILE`` (a JSON object
``{"model": [input_per_million, output_per_million]}``). A model missing from the table
gets no cost (unknown, not zero)."""


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
    message, codes = _error_fields(body)
    if codes & CONTEXT_LIMIT_CODES or any(p.search(message) for p in CONTEXT_LIMIT_PATTERNS):
        return message[:300]
    return None


def _error_fields(body: str) -> tuple[str, set[str]]:
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


def load_price_table(path: str | Path) -> dict[str, tuple[float, float]]:
    """Read a JSON price table ``{"model": [input_per_million, output_per_million]}``.

    Raises:
        ConfigError: the file is missing or not in that shape.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(k): (float(v[0]), float(v[1])) for k, v in data.items()}
    except (OSError, ValueError, TypeError, IndexError, AttributeError) as exc:
        raise ConfigError(
            f"price table {path}: expected a JSON object "
            f"{{\"model\": [input_per_million, output_per_million]}} ({exc})."
        ) from exc


DEFAULT_REQUEST_TIMEOUT_S = 300.0
"""One request's deadline: long enough for a full reply of a small model on a CPU (llama.cpp
serves ~5-20 tokens a second there), so a slow server is not abandoned and asked again
while it is still generating."""

DEFAULT_TURN_DEADLINE_S = 900.0
"""One turn's deadline, every retry included: three slow requests."""


def parse_model_args(items: Sequence[str]) -> dict[str, Any]:
    """``--model-arg KEY=VALUE`` options as request body fields; a value is read as JSON when it
    parses (``seed=7``, ``stop=["\\n"]``, ``logprobs=true``), else kept as a string.

    Raises:
        ConfigError: an item without ``=`` or with an empty key.
    """
    fields: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--model-arg expects KEY=VALUE (the value JSON or text, e.g. seed=7), got {item!r}.")
        try:
            fields[key.strip()] = json.loads(raw)
        except ValueError:
            fields[key.strip()] = raw
    return fields


_NAMED_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "max_tokens", "tools", "stream"})
"""Request fields the config sets itself; ``extra_body`` may not repeat them."""


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach the model and how to prompt it.

    Attributes:
        model: the model name the endpoint knows.
        base_url: the endpoint up to ``/v1`` (``.../chat/completions`` is appended).
        api_key_env: the environment variable holding the key; a missing variable is an
            error unless the endpoint is on loopback (local servers rarely need a key).
        mode: ``react`` (text in the env's grammar) or ``tools`` (native tool calling).
        temperature: sampling temperature (``--temperature``).
        top_p: nucleus sampling mass (``--top-p``); None leaves the server's default.
        max_tokens: completion cap per turn (``--max-tokens``); a reply cut there has the
            finish reason ``length`` and is recorded as a truncated reply, not a format error.
        request_timeout_s: deadline of one HTTP request (``--request-timeout``). After it the
            client gives up and retries, but a server without cancellation (llama.cpp's, most
            local servers) may still be generating the abandoned reply, so the retry queues
            behind it: on a slow local server set it above the time one full reply takes.
        turn_deadline_s: deadline of one turn including every retry (``--turn-deadline``).
        extra_body: more request body fields (``--model-arg KEY=VALUE``: ``seed``,
            ``repeat_penalty``, ``stop`` ...), sent as given; the named settings above win.
        max_retries: retries after the first attempt on 429, 5xx and connection errors.
        backoff_s: the first backoff; doubled each retry, with jitter, capped at 30 s.
        prices: extra price table entries (USD per million input, output tokens).
        max_rps: requests per second to this endpoint at most, over every episode of the
            process (``--max-rps``); None for no limit.
    """

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    mode: Literal["react", "tools"] = "react"
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 512
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    turn_deadline_s: float = DEFAULT_TURN_DEADLINE_S
    max_retries: int = 5
    backoff_s: float = 1.0
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_rps: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_rps is not None and self.max_rps <= 0:
            raise ConfigError(f"max_rps must be positive, got {self.max_rps!r}.")
        if self.max_tokens <= 0:
            raise ConfigError(f"max_tokens must be a positive number of tokens, got {self.max_tokens!r}.")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}.")
        named = sorted(set(self.extra_body) & _NAMED_FIELDS)
        if named:
            raise ConfigError(f"--model-arg {', '.join(named)}: set by its own option (--temperature, --top-p, "
                              "--max-tokens, the agent's model and mode); give it there instead.")
        if self.request_timeout_s <= 0 or self.turn_deadline_s <= 0:
            raise ConfigError(f"request_timeout_s and turn_deadline_s must be positive seconds, got "
                              f"{self.request_timeout_s!r} and {self.turn_deadline_s!r}.")

    def api_key(self) -> str | None:
        """The key from the environment.

        Raises:
            ConfigError: the variable is not set and the endpoint is not on loopback.
        """
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        host = urllib.parse.urlparse(self.base_url).hostname or ""
        if host in LOOPBACK_HOSTS:
            return None
        raise ConfigError(
            f"no API key: set the environment variable {self.api_key_env} (or name another one with "
            "--api-key-env), or point --base-url at a local server."
        )

    def price(self) -> tuple[float, float] | None:
        table = {**DEFAULT_PRICES, **self.prices}
        return table.get(self.model)


def _openai() -> Any:
    """The ``openai`` module.

    Raises:
        ConfigError: the SDK is not installed (with the install line).
    """
    try:
        import openai
    except ImportError as exc:
        raise ConfigError(f"model calls need the openai SDK: {OPENAI_HINT}") from exc
    return openai


_WARM = threading.Event()


def _warm_up() -> None:
    """Pay the SDK's one-time costs (lazy imports, model schemas: ~0.1-0.7 s here) when a client
    is made, not inside the first turn of an episode, where they would delay every caller."""
    if _WARM.is_set():
        return
    openai = _openai()
    _ = openai.AsyncOpenAI(api_key="warm-up", base_url="http://127.0.0.1:9/v1", max_retries=0).chat.completions
    openai.types.chat.ChatCompletion.model_validate({
        "id": "warm-up", "object": "chat.completion", "created": 0, "model": "warm-up",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}]})
    _WARM.set()


RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Statuses under 500 that are worth retrying (as the SDK's own policy has it)."""


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
        body.update({"model": self.config.model, "messages": list(messages),
                     "temperature": self.config.temperature, "max_tokens": self.config.max_tokens})
        if self.config.top_p is not None:
            body["top_p"] = self.config.top_p
        if tools:
            body["tools"] = list(tools)
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
            ModelAPIError: retries or the deadline ran out, or a status retrying cannot fix.
        """
        body = self._body(messages, tools, extra)
        deadline = time.monotonic() + self.config.turn_deadline_s
        delay = self.config.backoff_s
        last_error = ""
        client = self._async_client()
        for attempt in range(self.config.max_retries + 1):
            await self._gate.acquire()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            started = time.perf_counter()
            try:
                response = await client.chat.completions.create(
                    **body, timeout=min(self.config.request_timeout_s, remaining))
                return self._completion(response, time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - classified below; anything not retryable is re-raised
                last_error, retry_after = self._classify(exc)
            if attempt == self.config.max_retries:
                break
            wait = self._wait(retry_after, delay, deadline)
            if wait is not None:
                await asyncio.sleep(wait)
            delay = min(delay * 2, 30.0)
        raise self._spent(last_error)

    def complete_sync(self, messages: Sequence[dict[str, Any]], *, tools: Sequence[dict[str, Any]] | None = None,
                      **extra: Any) -> Completion:
        """:meth:`complete` for synchronous callers (the SDK's ``OpenAI`` client, the same policy).

        Raises:
            AgentContextLimitError: the conversation exceeds the model's context window.
            ModelAPIError: retries or the deadline ran out, or a status retrying cannot fix.
        """
        body = self._body(messages, tools, extra)
        deadline = time.monotonic() + self.config.turn_deadline_s
        delay = self.config.backoff_s
        last_error = ""
        client = self._sync_client()
        for attempt in range(self.config.max_retries + 1):
            time.sleep(self._gate.reserve())
            time.sleep(self._gate.paused_for())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            started = time.perf_counter()
            try:
                response = client.chat.completions.create(**body, timeout=min(self.config.request_timeout_s, remaining))
                return self._completion(response, time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - classified below; anything not retryable is re-raised
                last_error, retry_after = self._classify(exc)
            if attempt == self.config.max_retries:
                break
            wait = self._wait(retry_after, delay, deadline)
            if wait is not None:
                time.sleep(wait)
            delay = min(delay * 2, 30.0)
        raise self._spent(last_error)

    # ------------------------------------------------------------ policy

    def _classify(self, exc: Exception) -> tuple[str, float | None]:
        """``(what failed, Retry-After seconds)`` for a retryable failure; raises anything else."""
        openai = _openai()
        if isinstance(exc, openai.APIStatusError):
            status = int(exc.status_code)
            text = _response_text(exc)
            if status not in RETRYABLE_STATUSES and status < 500:
                overflow = context_limit_message(status, text)
                if overflow is not None:
                    raise AgentContextLimitError(self.config.model, overflow, status) from exc
                raise ModelAPIError(
                    f"{self.config.base_url.rstrip('/')}/chat/completions answered {status}: {text[:300]}. Check the "
                    f"model name, the key in ${self.config.api_key_env} and the base URL.", status) from exc
            return f"HTTP {status}: {text[:300]}", _retry_after(exc.response.headers.get("retry-after"))
        if isinstance(exc, (openai.APIConnectionError, ConnectionError, TimeoutError)):  # APITimeoutError included
            return f"{type(exc).__name__}: {exc}", None
        if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
            # A 200 whose body is not a completion: the server is broken; retry.
            return f"invalid response: {exc}", None
        raise exc

    def _wait(self, retry_after: float | None, delay: float, deadline: float) -> float | None:
        """Seconds to sleep before the next attempt; None when a Retry-After paused the shared gate
        (the next ``acquire`` waits it out, with every other caller of the endpoint)."""
        if retry_after is not None:
            self._gate.pause(min(retry_after, 30.0, max(0.0, deadline - time.monotonic())))
            return None
        # Full jitter keeps concurrent callers from retrying in lockstep after a shared failure.
        return min(random.uniform(0, delay), max(0.0, deadline - time.monotonic()))

    def _spent(self, last_error: str) -> EndpointUnavailableError:
        return EndpointUnavailableError(
            f"{self.config.base_url.rstrip('/')}/chat/completions failed after {self.config.max_retries + 1} attempts "
            f"within {self.config.turn_deadline_s:g} s (last: {last_error}). Is the server up at --base-url? If it is "
            "just slow, lower --concurrency or set --max-rps.", self.config)

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


def _response_text(exc: Any) -> str:
    try:
        return str(exc.response.text)
    except Exception:  # noqa: BLE001 - a streamed or closed body: fall back to the SDK's message
        return str(exc.message)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


__all__ = ["DEFAULT_PRICES", "DEFAULT_REQUEST_TIMEOUT_S", "DEFAULT_TURN_DEADLINE_S", "Completion",
           "EndpointUnavailableError", "ModelAPIError", "ModelClient", "OpenAIConfig", "context_limit_message",
           "load_price_table", "parse_model_args"]
