"""An episode as OpenAI chat messages: the one builder every part of the package uses.

The built-in OpenAI-compatible agent (:mod:`agentunit_gym.eval.agents.openai_agent`), the
:class:`~agentunit_gym.wrappers.chat.ChatMessages` wrapper and the trajectory export
(:mod:`agentunit_gym.eval.record.export`) all build the conversation with :class:`ChatTranscript`,
so what the evaluator sends a model and what a trainer trains on are the same messages.

A conversation has a *style*, the same values as the agent's ``OpenAIConfig.mode``:

- ``react``: the system message carries the env's grammar, the domain's worked example
  follows as user / assistant text turns, every reply is an assistant text message and
  every observation a user message.
- ``tools``: the system message asks for one tool call a turn, the worked example is
  written as tool calls, a reply that is a JSON tool call (``{"name": ..., "arguments":
  {...}}``) becomes an assistant message with ``tool_calls`` and the observation that
  answers it a ``tool`` message with its ``tool_call_id``; any other reply stays a text
  message, answered by a user message. Its env runs in tool-calls-only mode
  (``gym.make(..., action_format="tools")``, which :class:`~agentunit_gym.wrappers.chat.ChatMessages`
  sets), so the task's message states no text grammar and a text reply is answered, not run.

Example:

    >>> import gymnasium as gym, agentunit_gym
    >>> env = gym.make("AgentUnit/DB-v0", backend="sqlite")
    >>> observation, info = env.reset(options={"task_id": "db-weather-03"})
    >>> chat = ChatTranscript("tools", examples=False)
    >>> _ = chat.start(info)                   # the system message (examples=True: + the worked example)
    >>> _ = chat.add_observation(observation)  # the task, as a user message
    >>> chat.add_reply('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}')
    {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'call_0', 'type': 'function',
     'function': {'name': 'execute_sql', 'arguments': '{"query": "SELECT 1"}'}}]}
    >>> chat.add_observation("[(1,)]")         # the answer to the call
    {'role': 'tool', 'tool_call_id': 'call_0', 'content': '[(1,)]'}
    >>> [message["role"] for message in chat.messages]
    ['system', 'user', 'assistant', 'tool']
    >>> env.close()
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Literal

from agentunit_gym.core.actions import looks_like_json_call, split_json_call
from agentunit_gym.core.domain import Prompt
from agentunit_gym.core.registry import domain_names, get_domain
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import ConfigError

ChatStyle = Literal["react", "tools"]
"""How replies and observations become messages (see the module docstring)."""

CHAT_STYLES: tuple[str, ...] = ("react", "tools")

GENERIC_INTRO = "You are an agent solving a task step by step with tools."
"""The system text for an env whose domain is not registered."""

EXAMPLE_END = "Episode finished."
"""The tool result that closes the worked example's last (committing) call in ``tools`` style."""


def _prompt(info: Mapping[str, Any]) -> Prompt | None:
    domain = str(info.get("domain", ""))
    return get_domain(domain).prompt if domain in domain_names() else None


EXAMPLE_NOTE = ("First comes a worked example of another task; its data and answers are not those of your task. "
                "Then your task, with the reply format.")
"""The system text's last sentence in ``react`` style, when the worked example follows."""


def system_prompt(info: Mapping[str, Any], style: str) -> str:
    """The system message for an episode: the domain's system text, and in ``react`` style a
    note that the worked example is another task.

    The reply grammar is not repeated here: every registered env's first observation states
    it (``info["grammar"]``, once; ``""`` in tool-calls-only mode, where there is none), and a
    model shown it twice, in two layouts, copied the layout and placeholders. An env of an
    unregistered domain gets the grammar here instead, in ``react`` style.

    Args:
        info: the reset ``info`` (``domain``, ``grammar``).
        style: ``react`` or ``tools``.
    """
    prompt = _prompt(info)
    intro = prompt.system if prompt is not None else GENERIC_INTRO
    if style == "tools":
        return intro + " Use exactly one tool call per turn."
    if prompt is None:
        grammar = str(info.get("grammar", ""))
        return f"{intro}\n\nHow to reply:\n{grammar}" if grammar else intro
    return f"{intro}\n\n{EXAMPLE_NOTE}"


def example_turns(info: Mapping[str, Any], style: str = "react") -> list[dict[str, Any]]:
    """The domain's worked example as prior chat turns.

    ``react``: user / assistant text turns (the ReAct replies). ``tools``: the same episode
    with the assistant's tool calls and the env's replies as tool results (ids
    ``example_<n>``), closed by a tool result :data:`EXAMPLE_END`.
    """
    prompt = _prompt(info)
    if prompt is None:
        return []
    turns: list[dict[str, Any]] = []
    if style != "tools":
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
        turns.append({"role": "tool", "tool_call_id": f"example_{len(prompt.example) - 1}", "content": EXAMPLE_END})
    return turns


def tool_call_message(name: str, arguments: Mapping[str, Any], call_id: str,
                      content: str | None = None) -> dict[str, Any]:
    """An assistant message carrying one tool call (arguments JSON-encoded, as OpenAI sends them)."""
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(dict(arguments), ensure_ascii=False)}}
    return {"role": "assistant", "content": content, "tool_calls": [call]}


class ChatTranscript:
    """The conversation of one episode, message by message.

    Call :meth:`start` with the reset ``info``, then :meth:`add_observation` with every
    observation (the task prompt first) and :meth:`add_reply` with every reply sent to the
    env. Each call returns the messages it added; :attr:`messages` holds them all.

    A reply may bring the assistant message its model produced (``message=``, or an
    :class:`~agentunit_gym.core.trace.AgentReply` whose ``message`` is set, as the built-in
    OpenAI agent's replies are): that message is kept as given (its ``content`` and first
    tool call, with the model's call id), so a conversation rebuilt from the replies is the
    one the model saw. Otherwise the message is derived from the reply text by the style;
    tool calls get the ids ``call_0``, ``call_1``, ... in order.

    Args:
        style: ``react`` or ``tools`` (module docstring).
        examples: put the domain's worked example after the system message (the built-in
            agent does, except when the env shows another release's tool names:
            ``info["protocol_tools"]``).

    Example:
        >>> import gymnasium as gym, agentunit_gym
        >>> env = gym.make("AgentUnit/DB-v0", backend="sqlite")
        >>> observation, info = env.reset(options={"task_id": "db-weather-03"})
        >>> chat = ChatTranscript("react")
        >>> _ = chat.start(info)               # the system message with the grammar, then the worked example
        >>> _ = chat.add_observation(observation)
        >>> chat.add_reply("Think: look.\\nAction: Operation\\n```sql\\nSELECT 1\\n```")
        {'role': 'assistant', 'content': 'Think: look.\\nAction: Operation\\n```sql\\nSELECT 1\\n```'}
        >>> [message["role"] for message in chat.messages][:3], chat.messages[-2]["role"]
        (['system', 'user', 'assistant'], 'user')
        >>> env.close()
    """

    def __init__(self, style: ChatStyle = "react", *, examples: bool = True) -> None:
        if style not in CHAT_STYLES:
            raise ConfigError(f"chat style must be one of {', '.join(CHAT_STYLES)}, got {style!r}.")
        self.style: ChatStyle = style
        self.examples = examples
        self.messages: list[dict[str, Any]] = []
        self._pending_call: str | None = None
        self._calls = 0

    def start(self, info: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Begin the episode described by the reset ``info``: the system message and the worked example,
        or the benchmark's own opening turns when ``info["chat_head"]`` holds them (``--protocol
        agentbench`` with a checkout: :mod:`agentunit_gym.wrappers.conversation`)."""
        head = info.get("chat_head")
        if head:
            self.messages = [dict(message) for message in head]
        else:
            self.messages = [{"role": "system", "content": system_prompt(info, self.style)}]
            if self.examples and not info.get("protocol_tools"):  # the example uses the env's own tool names
                self.messages += example_turns(info, self.style)
        self._pending_call = None
        self._calls = 0
        return list(self.messages)

    def add_observation(self, observation: str) -> dict[str, Any]:
        """What the agent reads next: the result of the pending tool call, else a user message."""
        if self._pending_call is not None:
            message = {"role": "tool", "tool_call_id": self._pending_call, "content": str(observation)}
            self._pending_call = None
        else:
            message = {"role": "user", "content": str(observation)}
        self.messages.append(message)
        return message

    def add_reply(self, reply: str, message: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The agent's reply as an assistant message.

        Args:
            reply: the text sent to the env.
            message: the assistant message the model produced (``content``, ``tool_calls``);
                default ``reply.message`` when ``reply`` is an ``AgentReply``.
        """
        if message is None and isinstance(reply, AgentReply):
            message = reply.message
        built = self._given(message) if message is not None else self._derived(str(reply))
        calls = built.get("tool_calls") or []
        self._pending_call = str(calls[0].get("id")) if calls else None
        self._calls += len(calls)
        self.messages.append(built)
        return built

    # -------------------------------------------------------------- private

    @staticmethod
    def _given(message: Mapping[str, Any]) -> dict[str, Any]:
        calls = message.get("tool_calls") or []
        if calls:
            # One action a turn: later calls are dropped, as the grammar's "last Act wins" is for text.
            first = copy.deepcopy(calls[0])
            return {"role": "assistant", "content": message.get("content") or None, "tool_calls": [first]}
        return {"role": "assistant", "content": message.get("content") or ""}

    def _derived(self, reply: str) -> dict[str, Any]:
        if self.style == "tools" and looks_like_json_call(reply):
            call = split_json_call(reply)
            if isinstance(call, tuple):
                return tool_call_message(call[0], call[1], f"call_{self._calls}")
        return {"role": "assistant", "content": reply}


__all__ = ["CHAT_STYLES", "EXAMPLE_END", "GENERIC_INTRO", "ChatStyle", "ChatTranscript", "example_turns",
           "system_prompt", "tool_call_message"]
