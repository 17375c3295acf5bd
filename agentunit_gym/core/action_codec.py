"""How an env reads the agent's replies and writes reference steps: its action codec.

Two forms of a reply reach every env: a JSON tool call, checked here against the env's tool
table, and the domain's ReAct text, parsed by the env's ``_parse_react`` hook. The codec
decides which form a reply is in (in tool-calls-only mode only a tool call is an action), and
writes a reference step back in either form (``_render_react`` for the ReAct one), the
oracle's side of the same grammar. The env's two hooks are passed in on each call, so the
codec holds no reference to the env and travels in a pickle as plain data.

Example:

    >>> from agentunit_gym.core.actions import Action, Param, ToolSpec
    >>> from agentunit_gym.tasks.spec import ReferenceStep
    >>> codec = ActionCodec((ToolSpec("say", "Say it.", (Param("word", "string", "the word"),), commits=True),),
    ...                     domain="echo")
    >>> react = lambda text: Action("say", {"word": text.removeprefix("say ")})
    >>> codec.parse("say hi", react, tools_only=False)
    Action(tool='say', arguments={'word': 'hi'}, form='react', thought='')
    >>> codec.render(ReferenceStep(tool="say", arguments="hi"), lambda tool, args: f"{tool} {args['word']}", "json")
    '{"name": "say", "arguments": {"word": "hi"}}'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentunit_gym.core.actions import (
    Action,
    ActionError,
    ActionIssue,
    ToolSpec,
    looks_like_json_call,
    parse_json_call,
    render_json_call,
)
from agentunit_gym.core.reference import SENTINEL, OutputReply
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import ReferenceStep

NO_TOOL_CALL_MESSAGE = "No executable tool calls found."
NO_TOOL_CALL_HINT = "Please call a tool instead."
"""What a reply without a tool call reads in tool-calls-only mode
(:meth:`~agentunit_gym.core.env.AgentEnv.require_tool_calls`): AgentBench FC's answer to one
("No executable tool calls found. Please call a tool instead")."""

ActionFormat = Literal["text", "tools"]
"""How the agent writes actions: ``text`` (the domain's ReAct grammar, or a JSON call) or
``tools`` (tool calls only, ``AgentEnv.require_tool_calls``)."""

ACTION_FORMATS: tuple[str, ...] = ("text", "tools")

ReplyForm = Literal["react", "json"]
ReactParser = Callable[[str], "Action | ActionError"]
"""The env's ``_parse_react``: a reply in the domain's grammar to an action or why it is not one."""
ReactRenderer = Callable[[str, dict[str, Any]], str]
"""The env's ``_render_react``: a call (tool, arguments) written in the domain's grammar."""


class ToolTable(Mapping[str, ToolSpec]):
    """An env's tools by name: read-only, and a plain object, so it pickles with the env."""

    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        self._tools = {t.name: t for t in tools}

    def __getitem__(self, name: str) -> ToolSpec:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolTable({sorted(self._tools)})"


@dataclass(frozen=True)
class ActionCodec:
    """An env's reading of replies and writing of reference steps (see the module).

    Args:
        tools: the env's tools; a JSON call is checked against them.
        domain: the domain's name, for messages.
        output_reader: ``observation -> output`` for reference steps that answer with the
            previous step's output (``from_output``): a module-level function, so a rendered
            reply pickles; None when the env's observations carry no output to answer with.
    """

    tools: tuple[ToolSpec, ...]
    domain: str
    output_reader: Callable[[str], str] | None = None
    tool_table: ToolTable = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_table", ToolTable(self.tools))

    def parse(self, text: str, react: ReactParser, *, tools_only: bool) -> Action | ActionError:
        """A raw reply as an action, or why it is not one (no side effects).

        Args:
            text: the reply (an :class:`~agentunit_gym.core.trace.AgentReply` carries the model's message).
            react: the env's ReAct parser, used for a reply that is not a JSON call.
            tools_only: only tool calls are actions; any other reply is a ``no_call`` error
                with AgentBench FC's words.
        """
        if not isinstance(text, str):
            return ActionError(ActionIssue.MALFORMED, f"the reply must be text, got {type(text).__name__}.")
        if tools_only and not is_tool_call(text):
            return ActionError(ActionIssue.NO_CALL, NO_TOOL_CALL_MESSAGE, hint=NO_TOOL_CALL_HINT)
        if looks_like_json_call(text):
            return parse_json_call(text, self.tool_table)
        return react(text)

    def render(self, step: ReferenceStep, react: ReactRenderer, form: ReplyForm) -> str:
        """A reference step as the agent would send it: a JSON call, or ``react``'s text.

        A ``from_output`` step becomes an :class:`~agentunit_gym.core.reference.OutputReply`,
        which the oracle completes from the previous observation.

        Raises:
            ConfigError: the step does not fit the tool, or asks for an output this env cannot read.
        """
        if step.from_output:
            return self._render_from_output(step, react, form)
        arguments = self.arguments_of(step)
        if form == "json":
            return render_json_call(step.tool, arguments)
        return react(step.tool, arguments)

    def arguments_of(self, step: ReferenceStep) -> dict[str, Any]:
        """The step's arguments by name (a plain value fills the tool's primary argument).

        Raises:
            ConfigError: a plain value for a tool that takes no argument.
        """
        if isinstance(step.arguments, dict):
            return dict(step.arguments)
        spec = self.tool_table.get(step.tool)
        if spec is None or spec.primary is None:
            raise ConfigError(f"reference step {step.tool!r} gives a plain value but the tool takes no argument.")
        return {spec.primary: step.arguments}

    def _render_from_output(self, step: ReferenceStep, react: ReactRenderer, form: ReplyForm) -> OutputReply:
        spec = self.tool_table.get(step.tool)
        if self.output_reader is None or spec is None or spec.primary is None:
            raise ConfigError(f"reference step {step.tool!r} takes its argument from the previous output, which "
                              f"the {self.domain} env cannot provide for that tool.")
        rendered = self.render(ReferenceStep(tool=step.tool, arguments={spec.primary: SENTINEL}), react, form)
        try:
            return OutputReply.from_rendering(rendered, extract=self.output_reader, json_string=form == "json")
        except ValueError as exc:
            raise ConfigError(f"the {self.domain} env cannot render {step.tool!r} with an output filled in: "
                              f"{exc}.") from exc


def is_tool_call(reply: str) -> bool:
    """Whether a reply is a tool call: the model's message carries ``tool_calls`` (an
    :class:`~agentunit_gym.core.trace.AgentReply` with its ``message``), or, for a reply
    without a message, the text is a JSON call."""
    message = reply.message if isinstance(reply, AgentReply) else None
    if message is not None:
        return bool(message.get("tool_calls"))
    return looks_like_json_call(reply)


def without_grammar(prompt: str, grammar: str) -> str:
    """``prompt`` with the reply grammar taken out (the blank lines around it closed up); a
    prompt that never states the grammar (a third-party env may leave it to the system
    message) is returned as is.

    Raises:
        ConfigError: the prompt states part of the grammar (one of its lines) but not all of
            it verbatim, so it cannot be taken out.
    """
    if not grammar:
        return prompt
    if grammar not in prompt:
        if any(len(line.strip()) >= 12 and line.strip() in prompt for line in grammar.splitlines()):
            raise ConfigError("tool-calls-only mode: the env's first observation states part of its grammar but "
                              "not all of it verbatim, so it cannot be left out; the domain env must state "
                              "info['grammar'] as is.")
        return prompt
    head, _, tail = prompt.partition(grammar)
    head, tail = head.rstrip(), tail.lstrip()
    return f"{head}\n\n{tail}" if head and tail else head + tail
