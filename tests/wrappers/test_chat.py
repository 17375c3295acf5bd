"""ChatMessages: observations as OpenAI chat messages."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from agentunit_gym.core.chat import ChatTranscript
from agentunit_gym.core.registry import domains
from agentunit_gym.core.spaces import ChatSpace
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import ChatMessages, make_eval_env
from tests.core.toy import ToyEnv

ECHO = '{"name": "echo", "arguments": {"text": "hi"}}'
NO_CALL_FEEDBACK = "Invalid format: No executable tool calls found. Please call a tool instead."
ANSWER = '{"name": "answer", "arguments": {"text": "42"}}'


def test_full_mode_gives_the_whole_conversation_with_tool_calls() -> None:
    env = ChatMessages(ToyEnv())
    messages, info = env.reset(options={"task_id": "t1"})
    assert isinstance(env.observation_space, ChatSpace) and env.observation_space.contains(messages)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[-1]["content"] == "Task: Say 42."
    messages, reward, terminated, _, _ = env.step(ECHO)
    assert messages[-2]["tool_calls"][0]["function"] == {"name": "echo", "arguments": '{"text": "hi"}'}
    assert messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "hi"}
    # A text reply: a text message, not run (tools style is tool-calls-only), answered by a user message.
    messages, *_ = env.step("Act: echo(plain)")
    assert messages[-2:] == [{"role": "assistant", "content": "Act: echo(plain)"},
                             {"role": "user", "content": NO_CALL_FEEDBACK}]
    messages, reward, terminated, _, _ = env.step(ANSWER)
    assert terminated and reward == 1.0
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "user",
                                             "assistant", "tool"]
    assert messages[-1]["tool_call_id"] == "call_1"
    # An observation is a copy: editing it leaves the transcript alone.
    messages[2]["tool_calls"][0]["id"] = "edited"
    assert env.messages[2]["tool_calls"][0]["id"] == "call_0"


def test_delta_mode_gives_only_the_new_messages_and_adds_up_to_full() -> None:
    full, delta = ChatMessages(ToyEnv()), ChatMessages(ToyEnv(), mode="delta")
    whole, _ = full.reset(options={"task_id": "t1"})
    appended, _ = delta.reset(options={"task_id": "t1"})
    assert appended == whole  # the opening messages
    for reply in (ECHO, "Act: echo(x)", ANSWER):
        whole, *_ = full.step(reply)
        new, *_ = delta.step(reply)
        assert len(new) == 1 and new[0]["role"] in ("user", "tool")
        # What a SkyRL-style trainer does: append its own reply, then the env's messages.
        appended += [delta.messages[-2], *new]
    assert appended == whole == delta.messages


def test_react_style_and_unknown_options() -> None:
    env = ChatMessages(ToyEnv(), style="react")
    messages, _ = env.reset(options={"task_id": "t1"})
    assert "Act: echo(<text>)" in messages[0]["content"]
    messages, *_ = env.step(ECHO)
    assert messages[-2:] == [{"role": "assistant", "content": ECHO}, {"role": "user", "content": "hi"}]
    with pytest.raises(ConfigError, match="'full' for the whole conversation"):
        ChatMessages(ToyEnv(), mode="all")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="react"):
        ChatMessages(ToyEnv(), style="json")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["full", "delta"])
def test_check_env_passes_on_the_standard_stack(mode: str) -> None:
    env = ChatMessages(make_eval_env("AgentUnit/DB-v0", backend="sqlite"), mode=mode)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)
    env.close()


def test_the_conversation_is_the_builders_for_the_same_replies() -> None:
    env = ChatMessages(gym.make("AgentUnit/DB-v0", backend="sqlite"))
    messages, info = env.reset(seed=0)
    chat = ChatTranscript("tools")
    chat.start(info)
    observation = messages[-1]["content"]
    chat.add_observation(observation)
    # DB-v0's worked example, then the task.
    assert messages == chat.messages and messages[2]["tool_calls"][0]["id"] == "example_0"
    replies = ('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}',
               "Action: Operation\n```sql\nSELECT 2\n```")
    for reply in replies:
        messages, *_ = env.step(reply)
        chat.add_reply(reply)
        chat.add_observation(messages[-1]["content"])
        assert messages == chat.messages
    env.close()


def test_sync_vector_env_batches_conversations_of_mixed_replies() -> None:
    envs = gym.vector.SyncVectorEnv([lambda: ChatMessages(ToyEnv()) for _ in range(2)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    observations, _ = envs.reset(seed=0)
    assert isinstance(observations, tuple) and [m[-1]["role"] for m in observations] == ["user", "user"]
    observations, rewards, terminated, truncated, infos = envs.step((ECHO, "not an action"))
    assert observations[0][-1]["role"] == "tool" and observations[1][-1]["role"] == "user"
    assert json.loads(observations[0][-2]["tool_calls"][0]["function"]["arguments"]) == {"text": "hi"}
    envs.close()


EMBEDDED = [(spec.id, next(b.name for b in d.backends if b.embedded)) for d in domains() for spec in d.envs]


@pytest.mark.parametrize(("env_id", "backend"), EMBEDDED)
def test_check_env_passes_on_every_registered_env(env_id: str, backend: str) -> None:
    env = ChatMessages(gym.make(env_id, backend=backend))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)
    messages, info = env.reset(seed=0)
    assert env.observation_space.contains(messages) and messages[-1]["role"] == "user"
    assert messages[0]["role"] == "system" and len(messages) > 2  # each domain has a worked example
    env.close()


def test_tools_style_puts_the_env_in_tool_calls_only_mode_and_react_style_refuses_it() -> None:
    env = ChatMessages(ToyEnv())
    assert env.unwrapped.tool_calls_only  # type: ignore[attr-defined]
    messages, info = env.reset(options={"task_id": "t1"})
    assert info["grammar"] == "" and "Act:" not in messages[0]["content"]
    assert not ChatMessages(ToyEnv(), style="react").unwrapped.tool_calls_only  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="style 'react' over an env in tool-calls-only mode"):
        ChatMessages(ToyEnv(action_format="tools"), style="react")
