"""The retry policy of every model call, sync and async alike, on ``tenacity``.

One :class:`RetryPolicy` per turn decides, for both of
:class:`~agentunit_gym.eval.agents.model_client.ModelClient`'s paths:

- what is retried: 408, 409, 429, every 5xx (but a 500 that reports a validation error of
  the request, as llama-cpp-python's server does for a field it does not take: retrying the
  same request cannot help), refused connections, timeouts and 200s whose body is not a
  completion (:func:`classify_failure`); a context overflow raises
  :class:`~agentunit_gym.errors.AgentContextLimitError` and any other 4xx
  :class:`~agentunit_gym.eval.agents.model_errors.ModelAPIError` at once;
- how long to wait: a 429's ``Retry-After`` pauses the endpoint's shared
  :class:`~agentunit_gym.eval.agents.ratelimit.RateGate` (every caller of the endpoint waits it
  out, capped at 30 s) and the next attempt waits at the gate; anything else backs off with
  full jitter (uniform in ``[0, backoff_s * 2**(n-1)]``, capped at 30 s), so concurrent callers
  do not retry in lockstep after a shared failure;
- when to stop: after ``max_retries`` retries, or at the turn's deadline
  (``turn_deadline_s``), whichever comes first; then
  :class:`~agentunit_gym.eval.agents.model_errors.EndpointUnavailableError` names the last failure.

Before every attempt the caller waits at the gate (``max_rps`` spacing and any pause): the
async path with ``await gate.acquire()``, the sync one with ``gate.wait()``, the same rule.

Example (a request refused once, then answered):

    >>> import openai
    >>> from agentunit_gym.eval.agents.model_config import OpenAIConfig
    >>> from agentunit_gym.eval.agents.ratelimit import RateGate
    >>> config = OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1", max_retries=2, backoff_s=0.001)
    >>> policy = RetryPolicy(config, RateGate())
    >>> replies = iter([ConnectionRefusedError("refused"), "42"])
    >>> def send(timeout):
    ...     reply = next(replies)
    ...     if isinstance(reply, Exception):
    ...         raise reply
    ...     return reply
    >>> for attempt in policy.retrying():      # async: async for attempt in policy.async_retrying()
    ...     with attempt:
    ...         remaining = policy.before_attempt_sync()
    ...         try:
    ...             answer = send(timeout=remaining)
    ...         except Exception as exc:
    ...             raise policy.classify(exc, openai) from exc
    >>> answer, attempt.retry_state.attempt_number
    ('42', 2)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import tenacity

from agentunit_gym.errors import AgentContextLimitError
from agentunit_gym.eval.agents.model_config import OpenAIConfig
from agentunit_gym.eval.agents.model_errors import (
    RETRYABLE_STATUSES,
    EndpointUnavailableError,
    ModelAPIError,
    context_limit_message,
    is_request_validation_error,
)
from agentunit_gym.eval.agents.ratelimit import RateGate

MAX_WAIT_S = 30.0
"""The longest single wait between two attempts (backoff or ``Retry-After``)."""


class RetryableFailure(Exception):
    """One failed attempt that the policy retries.

    Attributes:
        what: what failed (``HTTP 503: ...``, ``APIConnectionError: ...``).
        retry_after: the server's ``Retry-After`` in seconds, when it gave one.
    """

    def __init__(self, what: str, retry_after: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after = retry_after


def classify_failure(exc: BaseException, config: OpenAIConfig, openai: Any) -> RetryableFailure:
    """The retryable failure an SDK exception is, or raise the typed error it means.

    Args:
        exc: what the SDK (or the response check) raised.
        config: the endpoint's config (for the messages).
        openai: the ``openai`` module (its exception types).

    Returns:
        The failure to retry.

    Raises:
        AgentContextLimitError: a refusal because the conversation exceeds the context window.
        ModelAPIError: another status that retrying cannot fix (400, 401, 404 ...).
        BaseException: ``exc`` itself when it is no endpoint failure at all (a bug: never retried).
    """
    if isinstance(exc, openai.APIStatusError):
        status = int(exc.status_code)
        text = response_text(exc)
        if (status not in RETRYABLE_STATUSES and status < 500) or is_request_validation_error(status, text):
            overflow = context_limit_message(status, text)
            if overflow is not None:
                raise AgentContextLimitError(config.model, overflow, status) from exc
            raise ModelAPIError(
                f"{config.base_url.rstrip('/')}/chat/completions answered {status}: {text[:300]}. Check the "
                f"model name, the key in ${config.api_key_env} and the base URL.", status) from exc
        return RetryableFailure(f"HTTP {status}: {text[:300]}", retry_after_seconds(exc.response.headers.get(
            "retry-after")))
    if isinstance(exc, (openai.APIConnectionError, ConnectionError, TimeoutError)):  # APITimeoutError included
        return RetryableFailure(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):
        # A 200 whose body is not a completion: the server is broken; retry.
        return RetryableFailure(f"invalid response: {exc}")
    raise exc


class _AtDeadline(tenacity.stop.stop_base):
    """Stop once the turn's deadline has passed."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() >= self.deadline


class RetryPolicy:
    """The policy of one turn (its deadline starts when the policy is made).

    Args:
        config: ``max_retries``, ``backoff_s``, ``turn_deadline_s``, ``request_timeout_s``.
        gate: the endpoint's shared rate gate.
        rng: the jitter's random source (a seeded ``random.Random`` in tests).
    """

    def __init__(self, config: OpenAIConfig, gate: RateGate, rng: Callable[[float, float], float] = random.uniform,
                 ) -> None:
        self.config = config
        self.gate = gate
        self.deadline = time.monotonic() + config.turn_deadline_s
        self._uniform = rng

    # ------------------------------------------------------------ tenacity

    def _kwargs(self) -> dict[str, Any]:
        attempts = tenacity.stop_after_attempt(self.config.max_retries + 1)
        return {"retry": tenacity.retry_if_exception_type(RetryableFailure),
                "stop": attempts | _AtDeadline(self.deadline),
                "wait": self._wait, "retry_error_callback": self._spent}

    def retrying(self) -> tenacity.Retrying:
        """The attempts of a synchronous call (sleeping with ``time.sleep``)."""
        return tenacity.Retrying(**self._kwargs())

    def async_retrying(self) -> tenacity.AsyncRetrying:
        """The attempts of an asynchronous call (sleeping with ``asyncio.sleep``)."""
        return tenacity.AsyncRetrying(**self._kwargs())

    # ------------------------------------------------------------ one attempt

    def remaining(self) -> float:
        """Seconds left of the turn's deadline, as the next request's timeout (at most
        ``request_timeout_s``).

        Raises:
            RetryableFailure: the deadline passed (while waiting at the gate): the policy stops.
        """
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RetryableFailure(f"the turn's deadline of {self.config.turn_deadline_s:g} s passed")
        return min(self.config.request_timeout_s, left)

    def before_attempt_sync(self) -> float:
        """Wait at the gate (blocking), then :meth:`remaining`."""
        self.gate.wait()
        return self.remaining()

    async def before_attempt(self) -> float:
        """Wait at the gate (a coroutine), then :meth:`remaining`."""
        await self.gate.acquire()
        return self.remaining()

    def classify(self, exc: BaseException, openai: Any) -> RetryableFailure:
        """:func:`classify_failure` under this policy's config."""
        return classify_failure(exc, self.config, openai)

    # ------------------------------------------------------------ decisions

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Seconds before the next attempt. A ``Retry-After`` pauses the shared gate instead
        (0 here: the next attempt waits at the gate, with every other caller)."""
        left = max(0.0, self.deadline - time.monotonic())
        failure = state.outcome.exception() if state.outcome is not None else None
        if isinstance(failure, RetryableFailure) and failure.retry_after is not None:
            self.gate.pause(min(failure.retry_after, MAX_WAIT_S, left))
            return 0.0
        ceiling = min(self.config.backoff_s * 2 ** (state.attempt_number - 1), MAX_WAIT_S)
        return min(self._uniform(0.0, ceiling), left)

    def _spent(self, state: tenacity.RetryCallState) -> Any:
        failure = state.outcome.exception() if state.outcome is not None else None
        last = failure.what if isinstance(failure, RetryableFailure) else str(failure)
        raise EndpointUnavailableError(
            f"{self.config.base_url.rstrip('/')}/chat/completions failed after {state.attempt_number} "
            f"attempt{'s' if state.attempt_number != 1 else ''} "
            f"within {self.config.turn_deadline_s:g} s (last: {last}). Is the server up at --base-url? If it is "
            "just slow, lower --concurrency or set --max-rps.", self.config)


def response_text(exc: Any) -> str:
    """The body of a failed response, else the SDK's message."""
    try:
        return str(exc.response.text)
    except Exception:  # noqa: BLE001 - a streamed or closed body: fall back to the SDK's message
        return str(exc.message)


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (the delta-seconds form); None when absent or not a number."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


__all__ = ["MAX_WAIT_S", "RetryPolicy", "RetryableFailure", "classify_failure", "response_text",
           "retry_after_seconds"]
