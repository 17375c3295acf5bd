"""The model client's retry policy, the same on the sync and the async path (tenacity), against
a real HTTP server: 429 with Retry-After, 5xx, a refused connection, a timeout, the deadline."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import Completion, EndpointUnavailableError, ModelAPIError, ModelClient
from agentunit_gym.eval.agents.model_config import OpenAIConfig
from agentunit_gym.eval.agents.ratelimit import endpoint_gate

MESSAGES = [{"role": "user", "content": "hi"}]
Call = Callable[[ModelClient], Completion]


def _sync(client: ModelClient) -> Completion:
    return client.complete_sync(MESSAGES)


def _async(client: ModelClient) -> Completion:
    return asyncio.run(client.complete(MESSAGES))


PATHS = pytest.mark.parametrize("call", [_sync, _async], ids=["sync", "async"])


def _ok(body: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "ok"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@PATHS
def test_429_retry_after_pauses_every_caller_of_the_endpoint(call: Call) -> None:
    with FakeChatServer(_ok, failures=[429], retry_after="1") as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.001))
        assert call(client).text == "ok"
        assert server.statuses == [429, 200]
        # The backoff alone (at most 1 ms) would retry at once: the Retry-After held it.
        assert server.arrivals[1] - server.arrivals[0] >= 0.95
        # The pause is the endpoint's: another caller that starts now still waits at the gate.
        server.failures.append(429)
        other = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.001))
        assert call(client).text == "ok"
        assert endpoint_gate(server.base_url) is endpoint_gate(server.base_url + "/")
        before = time.monotonic()
        endpoint_gate(server.base_url).pause(0.5)
        assert call(other).text == "ok" and time.monotonic() - before >= 0.45


@PATHS
def test_5xx_is_retried_with_backoff_until_it_succeeds(call: Call) -> None:
    with FakeChatServer(_ok, failures=[502, 503, 500]) as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01, max_retries=3))
        assert call(client).text == "ok"
        assert server.statuses == [502, 503, 500, 200]


@PATHS
def test_5xx_past_the_retries_is_an_endpoint_failure_naming_the_last_status(call: Call) -> None:
    with FakeChatServer(_ok, failures=[503] * 10) as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01, max_retries=2))
        with pytest.raises(EndpointUnavailableError, match=r"after 3 attempts .*HTTP 503"):
            call(client)
        assert server.statuses == [503, 503, 503]


@PATHS
def test_a_refused_connection_is_retried_then_an_endpoint_failure(call: Call) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    client = ModelClient(OpenAIConfig(model="m", base_url=url, backoff_s=0.01, max_retries=2))
    with pytest.raises(EndpointUnavailableError, match=r"after 3 attempts .*APIConnectionError") as caught:
        call(client)
    assert caught.value.config.base_url == url  # the evaluator probes this endpoint next


@PATHS
def test_a_timeout_is_retried_and_the_turn_deadline_bounds_every_attempt(call: Call) -> None:
    with FakeChatServer(_ok, latency_s=1.5) as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01, max_retries=1,
                                          request_timeout_s=0.3))
        with pytest.raises(EndpointUnavailableError, match=r"after 2 attempts .*APITimeoutError"):
            call(client)
        # Many retries, but one deadline for the turn: it stops there, not after 20 timeouts.
        bounded = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01, max_retries=20,
                                           request_timeout_s=0.3, turn_deadline_s=1.0))
        attempts_before = len(server.arrivals)
        started = time.monotonic()
        with pytest.raises(EndpointUnavailableError, match="within 1 s"):
            call(bounded)
        assert time.monotonic() - started >= 0.9  # not before the deadline
        # Each attempt lasts its 0.3 s timeout at least: the deadline allows four, not 21.
        assert 1 <= len(server.arrivals) - attempts_before <= 4


@PATHS
def test_a_status_retrying_cannot_fix_is_raised_at_once(call: Call) -> None:
    with FakeChatServer(_ok, failures=[404, 404]) as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        with pytest.raises(ModelAPIError, match="answered 404") as caught:
            call(client)
        assert not isinstance(caught.value, EndpointUnavailableError) and caught.value.status == 404
        assert server.statuses == [404]


@PATHS
def test_a_500_reporting_a_request_validation_error_is_not_retried(call: Call) -> None:
    """llama-cpp-python's server answers a request field it does not take with a 500 whose
    message is a validation error of the body: sending it again cannot help."""
    with FakeChatServer(_ok, refuse_response_format=500) as server:
        client = ModelClient(OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01))
        send = (lambda: client.complete_sync(MESSAGES, response_format={"type": "json_schema"})) if call is _sync \
            else (lambda: asyncio.run(client.complete(MESSAGES, response_format={"type": "json_schema"})))
        with pytest.raises(ModelAPIError, match="validation error") as caught:
            send()
        assert caught.value.status == 500 and not isinstance(caught.value, EndpointUnavailableError)
        assert server.statuses == [500]
        assert call(client).text == "ok"  # without the field, the same server answers
