"""The one chat-message builder (core/chat.py) and the chat spaces."""

from __future__ import annotations

import json
import pickle

import pytest
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from agentunit_gym.core.chat import EXAMPLE_END, GENERIC_INTRO, ChatTranscript, example_turns, system_prompt
from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.spaces import ChatMessageSpace, ChatSpace
from agentunit_gym.core.trace import AgentReply, Usage
from agentunit_gym.errors import ConfigError

TOY_INFO = {"domain": "toy-unregistered", "grammar": "Act: echo(<text>)", "tools": []}
DB_INFO = {"domain": "db", "grammar": "Action: Operation ...", "tools": []}


def test_tools_style_turns_json_calls_into_tool_calls_and_tool_results() -> None:
    chat = ChatTranscript("tools")
    opening = chat.start(TOY_INFO)
    assert opening == [{"role": "system", "content": GENERIC_INTRO + " Use exactly one tool call per turn."}]
    assert chat.add_observation("Task: say 42") == {"role": "user", "content": "Task: say 42"}
    first = chat.add_reply('{"name": "echo", "arguments": {"text": "hé"}}')
    assert first == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "echo", "arguments": '{"text": "hé"}'}}]}
    assert chat.add_observation("hé") == {"role": "tool", "tool_call_id": "call_0", "content": "hé"}
    # A fenced call, and arguments given as a JSON string, as OpenAI returns them.
    second = chat.add_reply('```json\n{"name": "answer", "arguments": "{\\"text\\": \\"42\\"}"}\n```')
    assert second["tool_calls"][0]["id"] == "call_1"
    assert json.loads(second["tool_calls"][0]["function"]["arguments"]) == {"text": "42"}
    assert chat.add_observation("done")["tool_call_id"] == "call_1"
    assert [m["role"] for m in chat.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]


def test_text_and_broken_json_replies_stay_text_answered_by_user_messages() -> None:
    chat = ChatTranscript("tools")
    chat.start(TOY_INFO)
    chat.add_observation("Task")
    assert chat.add_reply("Act: echo(hi)") == {"role": "assistant", "content": "Act: echo(hi)"}
    assert chat.add_observation("hi") == {"role": "user", "content": "hi"}
    assert chat.add_reply('{"name": "echo", "arguments": ') == {"role": "assistant",
                                                               "content": '{"name": "echo", "arguments": '}
    assert chat.add_observation("Invalid format")["role"] == "user"


def test_react_style_keeps_json_replies_as_text() -> None:
    chat = ChatTranscript("react")
    chat.start(TOY_INFO)
    chat.add_observation("Task")
    reply = '{"name": "echo", "arguments": {"text": "x"}}'
    assert chat.add_reply(reply) == {"role": "assistant", "content": reply}
    assert chat.add_observation("x") == {"role": "user", "content": "x"}
    assert "Act: echo(<text>)" in chat.messages[0]["content"]


def test_a_models_message_is_kept_as_given() -> None:
    chat = ChatTranscript("tools")
    chat.start(TOY_INFO)
    chat.add_observation("Task")
    call = {"id": "model-7", "type": "function", "function": {"name": "echo", "arguments": '{"text":"a"}'}}
    extra = {"id": "model-8", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
    reply = AgentReply('{"name": "echo", "arguments": {"text": "a"}}', Usage(tokens_in=3),
                       {"role": "assistant", "content": "Looking first.", "tool_calls": [call, extra]})
    kept = chat.add_reply(reply)
    # The model's id, its raw arguments and the text beside the call; one call a turn.
    assert kept == {"role": "assistant", "content": "Looking first.", "tool_calls": [call]}
    assert chat.add_observation("a") == {"role": "tool", "tool_call_id": "model-7", "content": "a"}
    # A model's text message stays text even when it looks like a call.
    text = AgentReply('{"name": "echo"}', None, {"role": "assistant", "content": '{"name": "echo"}'})
    assert chat.add_reply(text) == {"role": "assistant", "content": '{"name": "echo"}'}
    assert chat.add_observation("x")["role"] == "user"
    # The message survives pickling (AsyncVectorEnv sends actions to other processes).
    assert pickle.loads(pickle.dumps(reply)).message == reply.message


def test_worked_example_of_a_registered_domain_in_both_styles() -> None:
    example = get_domain("db").prompt.example
    react = ChatTranscript("react").start(DB_INFO)
    assert react[0]["content"] == system_prompt(DB_INFO, "react")
    assert [m["role"] for m in react[1:]] == ["user", "assistant"] * len(example)
    assert react[2]["content"] == example[0].react
    tools = ChatTranscript("tools").start(DB_INFO)
    assert tools[1:] == example_turns(DB_INFO, "tools")
    assert tools[-1] == {"role": "tool", "tool_call_id": f"example_{len(example) - 1}", "content": EXAMPLE_END}
    assert tools[2]["tool_calls"][0]["function"]["name"] == example[0].tool
    # Another release's tool names: no example (it is written with the env's names).
    assert len(ChatTranscript("tools").start({**DB_INFO, "protocol_tools": True})) == 1
    assert len(ChatTranscript("react", examples=False).start(DB_INFO)) == 1


def test_unknown_style_is_refused() -> None:
    with pytest.raises(ConfigError, match="react, tools"):
        ChatTranscript("json")  # type: ignore[arg-type]


def test_chat_space_contains_conversations_and_batches() -> None:
    space = ChatSpace(seed=3)
    good = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                   "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "r"}]
    assert space.contains(good) and space.contains(tuple(good)) and space.contains([])
    assert not space.contains([{"role": "tool", "content": "r"}])  # no tool_call_id
    assert not space.contains([{"role": "user", "content": None}])  # None only beside tool calls
    assert not space.contains([{"role": "robot", "content": "x"}])
    assert not space.contains("text")
    sample = space.sample()
    assert isinstance(sample, list) and space.contains(sample)
    assert ChatMessageSpace().contains(ChatMessageSpace(seed=1).sample())
    batched = batch_space(space, 2)
    out = concatenate(space, [good, []], create_empty_array(space, 2))
    assert len(batched) == 2 and out == (good, [])
