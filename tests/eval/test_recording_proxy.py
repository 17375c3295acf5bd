"""The recording proxy: what passes through it reaches the server unchanged, comes back
unchanged, and is recorded; an upstream that is down is a 502, never a hang."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import EndpointUnavailableError, ModelClient
from agentunit_gym.eval.agents.model_config import OpenAIConfig
from agentunit_gym.eval.agents.recording_proxy import RecordingProxy


def test_requests_and_answers_pass_through_and_are_recorded(tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    with FakeChatServer(lambda body: {"role": "assistant", "content": "hello", "finish_reason": "length"}) as server, \
            RecordingProxy(server.base_url.removesuffix("/v1"), log=log) as proxy:
        client = ModelClient(OpenAIConfig(model="m", base_url=proxy.base_url, temperature=0.3))
        completion = asyncio.run(client.complete([{"role": "user", "content": "Task: say hi"}]))
    assert completion.text == "hello" and completion.finish_reason == "length"
    assert server.requests == proxy.chat_requests()  # the server got exactly what the client sent
    (exchange,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert exchange["path"] == "/v1/chat/completions" and exchange["status"] == 200
    assert exchange["request"]["messages"] == [{"role": "user", "content": "Task: say hi"}]
    assert exchange["request"]["temperature"] == 0.3
    assert exchange["response"]["choices"][0]["finish_reason"] == "length"


def test_an_upstream_that_is_down_is_a_502_the_client_retries_then_gives_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with RecordingProxy(f"http://127.0.0.1:{port}", timeout_s=2.0) as proxy:
        client = ModelClient(OpenAIConfig(model="m", base_url=proxy.base_url, backoff_s=0.01, max_retries=1))
        with pytest.raises(EndpointUnavailableError, match="HTTP 502"):
            client.complete_sync([{"role": "user", "content": "hi"}])
    assert [e["status"] for e in proxy.exchanges] == [502, 502]
    assert "did not answer" in proxy.exchanges[0]["response"]["error"]["message"]
