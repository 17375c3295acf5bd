"""An agent backed by any OpenAI-compatible chat-completions endpoint.

Two ways to talk to the env:

- ``mode="react"`` (default): an AgentBench-style prompt for the domain (the env's grammar
  plus one worked example as prior turns), the model's text is the action.
- ``mode="tools"``: native tool calling with the env's tool schemas (``info["tools"]``);
  the model's tool call is sent to the env as a JSON call, the observation comes back as
  the tool's result.

Asynchronous: ``act`` is ``async def``, so the evaluator keeps hundreds of turns in flight
from one event loop. Standard library HTTP (``urllib``), each request in a thread of a
shared pool (an OpenAI SDK client replaces it later). Retries with exponential backoff on
429 and 5xx and on connection failures, within a deadline per turn. Every agent talking to
one endpoint shares its :class:`~agentunit_gym.eval.ratelimit.RateGate`: ``max_rps`` caps
the requests per second of the whole process, and a 429's ``Retry-After`` holds every
episode's requests, not only the one that got it. A refusal because the conversation
outgrew the model's context window (:func:`context_limit_message`) raises
:class:`~agentunit_gym.errors.AgentContextLimitError` at once, so the evaluator ends the
episode as CLE. Tokens come from the response's
``usage``; cost from a price table (USD per million tokens) the user can extend.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentunit_gym.core.domain import Prompt
from agentunit_gym.core.registry import domain_names, get_domain
from agentunit_gym.core.trace import AgentReply, Usage
from agentunit_gym.errors import AgentContextLimitError, AgentUnitError, ConfigError
from agentunit_gym.eval.ratelimit import RateGate, endpoint_gate

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


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach the model and how to prompt it.

    Attributes:
        model: the model name the endpoint knows.
        base_url: the endpoint up to ``/v1`` (``.../chat/completions`` is appended).
        api_key_env: the environment variable holding the key; a missing variable is an
            error unless the endpoint is on loopback (local servers rarely need a key).
        mode: ``react`` (text in the env's grammar) or ``tools`` (native tool calling).
        temperature: sampling temperature.
        max_tokens: completion cap per turn.
        request_timeout_s: deadline of one HTTP request.
        turn_deadline_s: deadline of one turn including every retry.
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
    max_tokens: int = 512
    request_timeout_s: float = 60.0
    turn_deadline_s: float = 180.0
    max_retries: int = 5
    backoff_s: float = 1.0
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_rps: float | None = None

    def __post_init__(self) -> None:
        if self.max_rps is not None and self.max_rps <= 0:
            raise ConfigError(f"max_rps must be positive, got {self.max_rps!r}.")

    def api_key(self) -> str | None:
        """The key from the environment.

        Raises:
            ConfigError: the variable is not set and the endpoint is not on loopback.
        """
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        host = urllib.parse.urlparse(self.base_url).hostname or ""
        if host in ("localhost", "127.0.0.1", "::1"):
            return None
        raise ConfigError(
            f"no API key: set the environment variable {self.api_key_env} (or name another one with "
            "--api-key-env), or point --base-url at a local server."
        )

    def price(self) -> tuple[float, float] | None:
        table = {**DEFAULT_PRICES, **self.prices}
        return table.get(self.model)


# ---------------------------------------------------------------- prompts

GENERIC_INTRO = "You are an agent solving a task step by step with tools."
"""The system text for an env whose domain is not registered."""


def _prompt(info: dict[str, Any]) -> Prompt | None:
    domain = str(info.get("domain", ""))
    return get_domain(domain).prompt if domain in domain_names() else None


def system_prompt(info: dict[str, Any], mode: str) -> str:
    """The system message for an episode: the domain's system text and, in react mode, the grammar."""
    prompt = _prompt(info)
    intro = prompt.system if prompt is not None else GENERIC_INTRO
    if mode == "tools":
        return intro + " Use exactly one tool call per turn."
    grammar = str(info.get("grammar", ""))
    return f"{intro}\n\nHow to reply:\n{grammar}\n\nNow, I will show you an example, then the real task."


def example_turns(info: dict[str, Any], mode: str = "react") -> list[dict[str, Any]]:
    """The domain's worked example as prior chat turns.

    ``react``: user / assistant text turns (the ReAct replies). ``tools``: the same episode
    with the assistant's tool calls and the env's replies as tool results.
    """
    prompt = _prompt(info)
    if prompt is None:
        return []
    turns: list[dict[str, Any]] = []
    if mode != "tools":
        for step in prompt.example:
            turns += [{"role": "user", "content": step.observation}, {"role": "assistant", "content": step.react}]
        return turns
    for index, step in enumerate(prompt.example):
        if index == 0:
            turns.append({"role": "user", "content": step.observation})
        else:
            turns.append({"role": "tool", "tool_call_id": f"example_{index - 1}", "content": step.observation})
        call = {"id": f"example_{index}", "type": "function",
                "function": {"name": step.tool, "arguments": json.dumps(dict(step.arguments), ensure_ascii=False)}}
        turns.append({"role": "assistant", "content": None, "tool_calls": [call]})
    if prompt.example:
        # The example's last call commits; close it so the real task starts on a clean turn.
        turns.append({"role": "tool", "tool_call_id": f"example_{len(prompt.example) - 1}",
                      "content": "Episode finished."})
    return turns


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
        self._key = config.api_key()
        self._messages: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self._pending_tool_call: str | None = None
        self._gate: RateGate = endpoint_gate(config.base_url, config.max_rps)

    def reset(self, info: dict[str, Any]) -> None:
        """Start a new conversation for the task in ``info``."""
        self._tools = list(info.get("tools") or [])
        self._messages = [{"role": "system", "content": system_prompt(info, self.config.mode)}]
        self._messages += example_turns(info, self.config.mode)
        self._pending_tool_call = None

    async def act(self, observation: str, info: dict[str, Any]) -> str:
        """Send the observation, return the model's action with its usage (a coroutine).

        Raises:
            AgentContextLimitError: the endpoint refused the turn because the conversation
                exceeds the model's context window (never retried).
            ModelAPIError: the endpoint kept failing until the retries or the deadline ran out,
                or answered with a status that retrying cannot fix (400, 401, 404 ...).
        """
        if not self._messages:
            self.reset(info)
        if self._pending_tool_call is not None:
            self._messages.append({"role": "tool", "tool_call_id": self._pending_tool_call, "content": observation})
            self._pending_tool_call = None
        else:
            self._messages.append({"role": "user", "content": observation})
        started = time.perf_counter()
        response = await self._complete()
        latency = time.perf_counter() - started
        message = (response.get("choices") or [{}])[0].get("message") or {}
        text = self._to_action(message)
        return AgentReply(text, self._usage(response.get("usage") or {}, latency))

    # ------------------------------------------------------------ private

    def _to_action(self, message: dict[str, Any]) -> str:
        calls = message.get("tool_calls") or []
        content = message.get("content") or ""
        if calls:
            call = calls[0]  # one action a turn: later calls are dropped, as the grammar's "last Act wins" is for text
            function = call.get("function") or {}
            self._messages.append({"role": "assistant", "content": content or None, "tool_calls": [call]})
            self._pending_tool_call = str(call.get("id", "call_0"))
            raw_args = function.get("arguments") or "{}"
            try:
                arguments = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
            except ValueError:
                # Hand the broken JSON to the env: it classifies it as an invalid format.
                return '{"name": ' + json.dumps(function.get("name", "")) + ', "arguments": ' + str(raw_args) + "}"
            return json.dumps({"name": function.get("name", ""), "arguments": arguments})
        self._messages.append({"role": "assistant", "content": content})
        return str(content)

    def _usage(self, usage: dict[str, Any], latency: float) -> Usage:
        tokens_in = usage.get("prompt_tokens")
        tokens_out = usage.get("completion_tokens")
        details = usage.get("completion_tokens_details") or {}
        cost = None
        price = self.config.price()
        if price is not None and tokens_in is not None and tokens_out is not None:
            cost = (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
        return Usage(tokens_in=tokens_in, tokens_out=tokens_out, reasoning_tokens=details.get("reasoning_tokens"),
                     cost=cost, latency_s=latency)

    async def _complete(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": self._messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if self.config.mode == "tools" and self._tools:
            body["tools"] = self._tools
        payload = json.dumps(body).encode()
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.config.turn_deadline_s
        delay = self.config.backoff_s
        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            await self._gate.acquire()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
            retry_after: float | None = None
            try:
                status, text, retry_after = await loop.run_in_executor(
                    _http_pool(), _post, request, min(self.config.request_timeout_s, remaining))
                if status == 200:
                    return dict(json.loads(text))
                detail = text[:300]
                if status != 429 and status < 500:
                    overflow = context_limit_message(status, text)
                    if overflow is not None:
                        raise AgentContextLimitError(self.config.model, overflow, status)
                    raise ModelAPIError(
                        f"{url} answered {status}: {detail}. Check the model name, the key in "
                        f"${self.config.api_key_env} and the base URL.", status)
                last_error = f"HTTP {status}: {detail}"
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            except ValueError as exc:  # a 200 with a body that is not JSON: the server is broken; retry
                last_error = f"invalid JSON in the response: {exc}"
            if attempt == self.config.max_retries:
                break
            if retry_after is not None:
                # The endpoint said how long to wait: every episode's requests wait it out
                # (the gate's pause), not only this one's.
                self._gate.pause(min(retry_after, 30.0, max(0.0, deadline - time.monotonic())))
            else:
                # Full jitter keeps concurrent slots from retrying in lockstep after a shared failure.
                await asyncio.sleep(min(random.uniform(0, delay), max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 30.0)
        raise ModelAPIError(
            f"{url} failed after {self.config.max_retries + 1} attempts within {self.config.turn_deadline_s:g} s "
            f"(last: {last_error}). Is the server up? Raise --request retries or the deadline if it is just slow."
        )


HTTP_THREADS = 512
"""Requests in flight at once over the process (each blocks a thread of the shared pool)."""

_HTTP_POOL: ThreadPoolExecutor | None = None
_HTTP_POOL_LOCK = threading.Lock()


def _http_pool() -> ThreadPoolExecutor:
    """The shared pool the blocking HTTP requests run in (made on first use; threads start on demand)."""
    global _HTTP_POOL
    with _HTTP_POOL_LOCK:
        if _HTTP_POOL is None:
            _HTTP_POOL = ThreadPoolExecutor(max_workers=HTTP_THREADS, thread_name_prefix="model-http")
        return _HTTP_POOL


def _post(request: urllib.request.Request, timeout: float) -> tuple[int, str, float | None]:
    """One blocking POST: ``(status, body, Retry-After seconds or None)``; an HTTP error status is
    returned, a connection failure raises."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8"), None
    except urllib.error.HTTPError as exc:
        text = exc.read(65536).decode("utf-8", "replace")
        return exc.code, text, _retry_after(exc.headers.get("Retry-After") if exc.headers else None)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
