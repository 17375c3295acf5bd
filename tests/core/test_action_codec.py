"""The action codec: replies read, reference steps written, both forms (core/action_codec.py)."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from agentunit_gym.core.action_codec import NO_TOOL_CALL_MESSAGE, ActionCodec, ToolTable
from agentunit_gym.core.actions import Action, ActionError, ActionIssue, Param, ToolSpec
from agentunit_gym.core.reference import OutputReply
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import ReferenceStep

TOOLS = (
    ToolSpec("look", "Look around."),
    ToolSpec("say", "Say words.", (Param("words", "string", "what to say"), Param("loud", "boolean", "?", False))),
    ToolSpec("answer", "Answer.", (Param("text", "string", "the answer"),), commits=True),
)
CODEC = ActionCodec(TOOLS, domain="test")


def react_parse(text: str) -> Action | ActionError:
    """``Act: tool|json-arguments``: a grammar the codec knows nothing of."""
    if not text.startswith("Act: "):
        return ActionError(ActionIssue.NO_CALL, "no Act line")
    tool, _, arguments = text[5:].partition("|")
    return Action(tool, json.loads(arguments) if arguments else {})


def react_render(tool: str, arguments: dict[str, Any]) -> str:
    return f"Act: {tool}|{json.dumps(arguments)}" if arguments else f"Act: {tool}"


STEPS = [
    ReferenceStep(tool="look"),
    ReferenceStep(tool="say", arguments={"words": "é ünïcode ✓", "loud": True}),
    ReferenceStep(tool="answer", arguments="forty-two"),  # a plain value fills the primary argument
]


@pytest.mark.parametrize("form", ["react", "json"])
@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.tool)
def test_render_then_parse_round_trips(step: ReferenceStep, form: str) -> None:
    text = CODEC.render(step, react_render, form)  # type: ignore[arg-type]
    parsed = CODEC.parse(text, react_parse, tools_only=False)
    assert isinstance(parsed, Action)
    assert (parsed.tool, parsed.arguments, parsed.form) == (step.tool, CODEC.arguments_of(step), form)


def test_json_calls_are_checked_against_the_tool_table() -> None:
    unknown = CODEC.parse('{"name": "shout", "arguments": {}}', react_parse, tools_only=False)
    missing = CODEC.parse('{"name": "answer", "arguments": {}}', react_parse, tools_only=False)
    assert isinstance(unknown, ActionError) and unknown.issue is ActionIssue.UNKNOWN_TOOL
    assert isinstance(missing, ActionError) and missing.issue is ActionIssue.MISSING_PARAMETER
    not_text = CODEC.parse(42, react_parse, tools_only=False)  # type: ignore[arg-type]
    assert isinstance(not_text, ActionError) and not_text.issue is ActionIssue.MALFORMED


def test_tool_calls_only_answers_text_and_reads_calls() -> None:
    text = CODEC.parse("Act: look", react_parse, tools_only=True)
    assert isinstance(text, ActionError) and (text.issue, text.message) == (ActionIssue.NO_CALL, NO_TOOL_CALL_MESSAGE)
    assert CODEC.parse("Act: look", react_parse, tools_only=False) == Action("look", {})
    call = CODEC.parse('{"name": "look", "arguments": {}}', react_parse, tools_only=True)
    assert call == Action("look", {}, form="json")
    # A model message that carries no tool call is text, whatever its content looks like.
    plain = AgentReply('{"name": "look", "arguments": {}}', message={"role": "assistant", "content": "{}"})
    assert isinstance(CODEC.parse(plain, react_parse, tools_only=True), ActionError)


def test_reference_steps_that_do_not_fit_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="takes no argument"):
        CODEC.arguments_of(ReferenceStep(tool="look", arguments="x"))
    with pytest.raises(ConfigError, match="cannot provide"):  # no output reader
        CODEC.render(ReferenceStep(tool="answer", from_output=True), react_render, "react")


@pytest.mark.parametrize(("form", "output"), [("react", "forty ✓"), ("json", 'he said "hi"\tthen')])
def test_from_output_steps_are_completed_from_the_observation(form: str, output: str) -> None:
    codec = ActionCodec(TOOLS, domain="test", output_reader=str.strip)
    reply = codec.render(ReferenceStep(tool="answer", from_output=True), react_render, form)  # type: ignore[arg-type]
    assert isinstance(reply, OutputReply)
    completed = pickle.loads(pickle.dumps(reply)).complete(f"  {output}\n")  # the JSON form escapes it
    parsed = codec.parse(completed, react_parse, tools_only=False)
    assert parsed == Action("answer", {"text": output}, form=form)  # type: ignore[arg-type]


def test_the_tool_table_is_read_only_and_travels() -> None:
    table = CODEC.tool_table
    assert isinstance(table, ToolTable) and list(table) == ["look", "say", "answer"] and table["answer"].commits
    with pytest.raises(TypeError):
        table["look"] = TOOLS[0]  # type: ignore[index]
    assert dict(pickle.loads(pickle.dumps(table))) == dict(table)
    assert pickle.loads(pickle.dumps(CODEC)).tool_table.keys() == table.keys()
