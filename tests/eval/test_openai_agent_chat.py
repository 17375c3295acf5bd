"""The built-in OpenAI agent and the ChatMessages wrapper build the same conversation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.registry import get_domain
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import wire_messages
from agentunit_gym.eval.agents.openai_agent import OpenAIChatAgent, OpenAIConfig
from agentunit_gym.wrappers import ChatMessages
from agentunit_gym.wrappers.aliases import RenameTools


def _call(call_id: str, name: str, arguments: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    # Raw arguments with the model's own spacing: the conversation must keep them as sent.
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments, indent=1)}}]}


def _tool_replies(answer_tool: str, answer_key: str) -> Iterator[dict[str, Any]]:
    yield _call("model-a", "execute_sql", {"query": "SELECT 1"}, content="Let me look first.")
    # A text reply in tools mode, although it looks like a call: it stays text.
    yield {"role": "assistant", "content": '{"name": "execute_sql", "arguments": {"query": "SELECT 2"}}'}
    yield {"role": "assistant", "content": "I am thinking."}
    yield _call("model-b", answer_tool, {answer_key: ["1"]})


def _react_replies() -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": "Action: Operation\n```sql\nSELECT 1\n```"}
    yield {"role": "assistant", "content": "no action here"}
    yield {"role": "assistant", "content": 'Action: Answer\nFinal Answer: ["1"]'}


@pytest.mark.parametrize("case", ["react", "tools", "agentbench-fc"])
def test_agent_requests_equal_the_wrappers_observations(case: str) -> None:
    mode = "react" if case == "react" else "tools"
    env: gym.Env[Any, Any] = gym.make("AgentUnit/DB-v0", backend="sqlite")
    if case == "agentbench-fc":  # another release's tool names: the agent and the wrapper drop the example
        env = RenameTools(env, get_domain("db").protocols["agentbench-fc"].tools)
        replies = _tool_replies("commit_final_answer", "answers")
    else:
        replies = _react_replies() if mode == "react" else _tool_replies("submit_answer", "answer")
    env = ChatMessages(env, style=mode)  # type: ignore[arg-type]
    with FakeChatServer(lambda body: next(replies)) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, mode=mode))  # type: ignore[arg-type]
        messages, info = env.reset(seed=0, options={"task_id": "db-weather-03"})
        agent.reset(info)
        observations = [messages]
        done = False
        while not done:
            reply = asyncio.run(agent.act(messages[-1]["content"], info))
            messages, _, terminated, truncated, info = env.step(reply)
            observations.append(messages)
            done = terminated or truncated
        # Request k carried exactly the conversation the wrapper showed before turn k (on the wire,
        # a tool call's null content is sent as "": wire_messages).
        assert len(server.requests) == len(observations) - 1 >= 3
        for request, seen in zip(server.requests, observations, strict=False):
            assert request["messages"] == wire_messages(seen)
        # And after the last reply, the agent's transcript is the wrapper's, less the final observation.
        assert agent.messages == env.messages[:-1]  # type: ignore[attr-defined]
    roles = {m["role"] for m in env.messages}  # type: ignore[attr-defined]
    has_example = len(observations[0]) > 2  # more than the system message and the task
    assert has_example == (case != "agentbench-fc")
    if mode == "tools":
        assert "tool" in roles
        ids = [m["tool_call_id"] for m in env.messages if m["role"] == "tool"]  # type: ignore[attr-defined]
        assert "model-a" in ids and "model-b" in ids  # the model's own call ids
        first_call = next(m for m in env.messages if m.get("tool_calls") and  # type: ignore[attr-defined]
                          m["tool_calls"][0]["id"] == "model-a")
        assert first_call["content"] == "Let me look first."
    else:
        assert roles == {"system", "user", "assistant"}
    env.close()
