"""The JSON tool-call parser and the argument checks, against a small tool table."""

from __future__ import annotations

import json

import pytest

from agentunit_gym.core import Action, ActionError, ActionIssue, FinishReason, Param, ToolSpec
from agentunit_gym.core.actions import (
    looks_like_json_call,
    parse_json_call,
    render_json_call,
    split_json_call,
    suggest,
    validate_call,
)

TOOLS = {
    t.name: t
    for t in (
        ToolSpec("run", "Run a query.", (Param("query", "string", "the query"),
                                         Param("limit", "integer", "rows", required=False))),
        ToolSpec("submit", "Give the answer.", (Param("answer", "array", "the values"),), commits=True),
        ToolSpec("done", "Finish.", (), commits=True),
    )
}


@pytest.mark.parametrize("text", [
    '{"name": "run", "arguments": {"query": "SELECT 1"}}',
    '  \n{"name": "run", "arguments": {"query": "SELECT 1"}}\n',
    '```json\n{"name": "run", "arguments": {"query": "SELECT 1"}}\n```',
    '```\n{"name": "run", "arguments": {"query": "SELECT 1"}}\n```',
    '{"type": "function", "function": {"name": "run", "arguments": {"query": "SELECT 1"}}}',
    '{"name": "run", "parameters": {"query": "SELECT 1"}}',
    '{"name": "run", "arguments": "{\\"query\\": \\"SELECT 1\\"}"}',
])
def test_every_accepted_form_gives_the_same_action(text: str) -> None:
    assert looks_like_json_call(text)
    assert split_json_call(text) == ("run", {"query": "SELECT 1"})
    assert parse_json_call(text, TOOLS) == Action("run", {"query": "SELECT 1"}, form="json")


@pytest.mark.parametrize("text", ["Action: Operation", "[1, 2]", "", "```sql\nSELECT 1\n```"])
def test_replies_that_are_not_json_calls(text: str) -> None:
    assert not looks_like_json_call(text)


@pytest.mark.parametrize("arguments", ['""', "null", '"  "'])
def test_empty_arguments_mean_none(arguments: str) -> None:
    assert split_json_call(f'{{"name": "done", "arguments": {arguments}}}') == ("done", {})
    assert parse_json_call(f'{{"name": "done", "arguments": {arguments}}}', TOOLS) == Action("done", {}, form="json")


@pytest.mark.parametrize(("text", "message", "tool"), [
    ('{"name": "run", "arguments": {', "not valid JSON", None),
    ("[" * 100_000, "not valid JSON", None),  # nesting deep enough to hit the recursion limit
    ('["run"]', "must be an object", None),
    ('{"arguments": {}}', 'has no "name"', None),
    ('{"name": "", "arguments": {}}', 'has no "name"', None),
    ('{"name": 3, "arguments": {}}', 'has no "name"', None),
    ('{"name": "run", "arguments": "{oops"}', "arguments of 'run' are not valid JSON", "run"),
    ('{"name": "run", "arguments": [1]}', "must be an object", "run"),
])
def test_malformed_calls_are_invalid_format(text: str, message: str, tool: str | None) -> None:
    error = split_json_call(text)
    assert isinstance(error, ActionError)
    assert error.issue is ActionIssue.MALFORMED and error.reason is FinishReason.INVALID_FORMAT
    assert message in error.message and error.tool == tool
    assert parse_json_call(text, TOOLS) == error
    assert error.feedback().startswith("Invalid format: ")


def test_unknown_tool_is_invalid_action_with_a_suggestion() -> None:
    error = parse_json_call('{"name": "sumbit", "arguments": {"answer": []}}', TOOLS)
    assert isinstance(error, ActionError)
    assert (error.issue, error.reason, error.tool) == (ActionIssue.UNKNOWN_TOOL, FinishReason.INVALID_ACTION, "sumbit")
    assert error.hint == "Did you mean 'submit'?"
    assert "done, run, submit" in error.message
    assert error.feedback() == f"Invalid action: {error.message} {error.hint}"
    assert error.to_info() == {"reason": "invalid_action", "issue": "unknown_tool", "message": error.message,
                               "hint": "Did you mean 'submit'?", "tool": "sumbit", "truncated_reply": False}


@pytest.mark.parametrize(("arguments", "issue", "message"), [
    ({}, ActionIssue.MISSING_PARAMETER, "needs the parameter 'query'"),
    ({"query": "x", "limt": 3}, ActionIssue.INVALID_PARAMETER, "has no parameter 'limt'"),
    ({"query": ["x"]}, ActionIssue.INVALID_PARAMETER, "must be of type string, got list"),
    ({"query": True}, ActionIssue.INVALID_PARAMETER, "must be of type string, got bool"),
    ({"query": "x", "limit": True}, ActionIssue.INVALID_PARAMETER, "must be of type integer, got bool"),
    ({"query": "x", "limit": "3"}, ActionIssue.INVALID_PARAMETER, "must be of type integer, got str"),
])
def test_argument_checks(arguments: dict[str, object], issue: ActionIssue, message: str) -> None:
    error = validate_call("run", arguments, TOOLS)
    assert isinstance(error, ActionError)
    assert error.issue is issue and error.reason is FinishReason.INVALID_ACTION and error.tool == "run"
    assert message in error.message


def test_extra_parameter_gets_a_suggestion() -> None:
    error = validate_call("run", {"query": "x", "limt": 3}, TOOLS)
    assert isinstance(error, ActionError) and error.hint == "Did you mean 'limit'?"


def test_numbers_are_accepted_where_text_is_expected_and_optional_params_may_be_left_out() -> None:
    assert validate_call("run", {"query": 42}, TOOLS) == Action("run", {"query": "42"}, form="json")
    assert validate_call("run", {"query": 1.5, "limit": 3}, TOOLS) == Action(
        "run", {"query": "1.5", "limit": 3}, form="json")


def test_render_json_call_round_trips() -> None:
    text = render_json_call("submit", {"answer": ["Zürich", "東京"]})
    assert "Zürich" in text  # not escaped: agents read it as written
    assert json.loads(text) == {"name": "submit", "arguments": {"answer": ["Zürich", "東京"]}}
    assert parse_json_call(text, TOOLS) == Action("submit", {"answer": ["Zürich", "東京"]}, form="json")


def test_json_schema_of_a_tool() -> None:
    schema = TOOLS["run"].json_schema()
    assert schema == {
        "type": "function",
        "function": {
            "name": "run",
            "description": "Run a query.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "the query"},
                               "limit": {"type": "integer", "description": "rows"}},
                "required": ["query"],
            },
        },
    }
    assert TOOLS["submit"].json_schema()["function"]["parameters"]["properties"]["answer"]["items"] == {
        "type": "string"}
    assert (TOOLS["run"].primary, TOOLS["done"].primary) == ("query", None)


def test_suggest_only_near_misses() -> None:
    assert suggest("SUBMT", ["run", "submit"]) == "Did you mean 'submit'?"
    assert suggest("launch", ["run", "submit"]) is None


def test_array_items_are_text_numbers_converted_others_refused() -> None:
    ok = validate_call("submit", {"answer": ["a", 3, 2.5]}, TOOLS)
    assert ok == Action("submit", {"answer": ["a", "3", "2.5"]}, form="json")
    for bad in ([True], [None], [{"v": 1}], [["nested"]]):
        error = validate_call("submit", {"answer": bad}, TOOLS)
        assert isinstance(error, ActionError) and error.issue is ActionIssue.INVALID_PARAMETER, bad
        assert "must be strings" in error.message
