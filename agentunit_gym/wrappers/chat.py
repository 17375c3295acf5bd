"""Observations as OpenAI chat messages, for trainers that work on conversations."""

from __future__ import annotations

import copy
from typing import Any, Literal, SupportsFloat, cast

import gymnasium as gym

from agentunit_gym.core.chat import CHAT_STYLES, ChatStyle, ChatTranscript
from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.spaces import ChatSpace
from agentunit_gym.errors import ConfigError

ChatMode = Literal["full", "delta"]
"""``full``: every observation is the whole conversation; ``delta``: only what the env added."""

CHAT_MODES: tuple[str, ...] = ("full", "delta")


class ChatMessages(gym.Wrapper[list[dict[str, Any]], str, str, str], gym.utils.RecordConstructorArgs):
    """Turn the text observations into the conversation as OpenAI chat messages.

    The messages are built by :class:`~agentunit_gym.core.chat.ChatTranscript`, the same
    builder the built-in OpenAI-compatible agent sends its model, so a trainer's
    conversation and the evaluator's are the same: a system message (the domain's system
    text), the domain's worked example (``examples=True``, left out when the env shows
    another release's tool names), the task as a user message, then per step the reply as an
    assistant message and the observation. In ``react`` style every reply is text and the
    task's message states the grammar.

    ``tools`` style puts the env in tool-calls-only mode (as ``gym.make(...,
    action_format="tools")`` does; :meth:`~agentunit_gym.core.env.AgentEnv.require_tool_calls`),
    so no message teaches a text grammar: the worked example is written as tool calls, the
    tool schemas are ``info["tools"]``, a JSON tool call (``{"name": ..., "arguments":
    {...}}``) becomes an assistant message with ``tool_calls`` (ids ``call_0``, ``call_1``,
    ...; an :class:`~agentunit_gym.core.trace.AgentReply` with a ``message`` keeps its own)
    and the observation a ``tool`` message with the matching ``tool_call_id``. Any other
    reply is a text message, not run, answered by a user message as under ``eval --protocol
    agentbench-fc`` ("No executable tool calls found. Please call a tool instead."). Over an
    env that is not an AgentUnit env (``Remote-v0``), make the served env with
    ``action_format="tools"``.

    ``mode="full"`` (default): each observation is the whole conversation so far (a new
    list each time). ``mode="delta"``: ``reset`` returns the opening messages and each
    ``step`` only the messages the env added (the observation's user or tool message),
    which is what trainers that append the model's own output and then the env's
    messages (SkyRL-Gym's ``BaseTextEnv``) want; the reply's message is in
    :attr:`messages` if needed.

    The observation space is :class:`~agentunit_gym.core.spaces.ChatSpace` (a subclass of
    gymnasium's ``Sequence`` of chat messages: ``check_env`` passes and vector envs batch
    it as a tuple of lists). The action is the agent's raw reply, as for the env. Put this
    wrapper outermost: the wrappers of the standard stack read text observations.

    Example:
        >>> import gymnasium as gym
        >>> env = ChatMessages(gym.make("AgentUnit/DB-v0", backend="sqlite"), style="tools")
        >>> messages, info = env.reset(seed=0)   # [system, (example ...), user: the task]
        >>> messages[0]["role"], messages[-1]["role"]
        ('system', 'user')
        >>> messages, reward, terminated, truncated, info = env.step(
        ...     '{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}')
        >>> messages[-2]["tool_calls"][0]["function"]["name"], messages[-1]["role"], messages[-1]["content"]
        ('execute_sql', 'tool', '[(1,)]')
        >>> env.close()

    Args:
        env: an AgentUnit env or a stack over one.
        mode: ``full`` or ``delta``.
        style: ``tools`` (default) or ``react``: the values of the agent's ``OpenAIConfig.mode``.
        examples: put the domain's worked example after the system message, as the built-in agent does.

    Raises:
        ConfigError: an unknown ``mode`` or ``style``, or ``react`` style over an env made with
            ``action_format="tools"``.
    """

    def __init__(self, env: gym.Env[str, str], mode: ChatMode = "full", style: ChatStyle = "tools",
                 examples: bool = True) -> None:
        if mode not in CHAT_MODES:
            raise ConfigError(f"ChatMessages mode must be one of {', '.join(CHAT_MODES)}, got {mode!r}: "
                              "'full' for the whole conversation, 'delta' for the new messages of each step.")
        if style not in CHAT_STYLES:
            raise ConfigError(f"ChatMessages style must be one of {', '.join(CHAT_STYLES)}, got {style!r}: "
                              "'tools' for JSON tool calls as tool_calls, 'react' for text replies.")
        base = env.unwrapped
        if isinstance(base, AgentEnv):
            if style == "tools":
                base.require_tool_calls()
            elif base.tool_calls_only:
                raise ConfigError("ChatMessages style 'react' over an env in tool-calls-only mode (made with "
                                  "action_format='tools'): the env shows no text grammar and runs no text reply; "
                                  "use style='tools', or make the env with action_format='text'.")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, style=style, examples=examples)
        # gymnasium types a wrapper's inner env with the wrapper's own observation type.
        super().__init__(env)  # type: ignore[arg-type]
        self.mode: ChatMode = mode
        self.style: ChatStyle = style
        self.examples = examples
        self.chat = ChatTranscript(style, examples=examples)
        self.observation_space = cast("gym.spaces.Space[list[dict[str, Any]]]", ChatSpace())

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation so far (the transcript's own list: copy it before changing it)."""
        return self.chat.messages

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self.chat = ChatTranscript(self.style, examples=self.examples)
        self.chat.start(info)
        self.chat.add_observation(str(observation))
        return _copy(self.chat.messages), info

    def step(self, action: str) -> tuple[list[dict[str, Any]], SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        # The reply joins the conversation after the env accepted the step (a step before
        # reset raises there and leaves the transcript as it was).
        self.chat.add_reply(action)
        added = self.chat.add_observation(str(observation))
        messages = _copy(self.chat.messages) if self.mode == "full" else [dict(added)]
        return messages, reward, terminated, truncated, info


def _copy(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # A caller that edits an observation does not edit the transcript.
    return [{**m, "tool_calls": copy.deepcopy(m["tool_calls"])} if "tool_calls" in m else dict(m) for m in messages]


__all__ = ["CHAT_MODES", "ChatMessages", "ChatMode"]
