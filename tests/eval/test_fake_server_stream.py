"""The fake chat server answers ``stream: true`` as OpenAI does (server-sent events), read by the openai client."""

from __future__ import annotations

from typing import Any

import pytest

openai = pytest.importorskip("openai")

from agentunit_gym.eval.agents.fake_server import FakeChatServer  # noqa: E402

DEADLINE_S = 30.0


def _stream(server: FakeChatServer) -> list[Any]:
    client = openai.OpenAI(base_url=server.base_url, api_key="fake", timeout=DEADLINE_S, max_retries=0)
    return list(client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}],
                                               stream=True, stream_options={"include_usage": True}))


def test_a_streamed_text_answer_reassembles_with_usage() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Act: answer(42)"}) as server:
        chunks = _stream(server)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Act: answer(42)"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert server.requests[0]["stream"] is True


def test_a_streamed_tool_call_keeps_its_id_name_and_arguments() -> None:
    call = {"id": "call_7", "type": "function", "function": {"name": "bash", "arguments": '{"script": "ls"}'}}
    with FakeChatServer(lambda body: {"role": "assistant", "content": None, "tool_calls": [call]}) as server:
        chunks = _stream(server)
    (delta_call,) = chunks[0].choices[0].delta.tool_calls
    assert (delta_call.id, delta_call.function.name, delta_call.function.arguments) == \
        ("call_7", "bash", '{"script": "ls"}')
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
