"""Agent actions: tool schemas, parsed actions, and the classification of what cannot be parsed.

An agent's reply is raw text. Each domain env accepts two forms of it: its AgentBench
ReAct grammar (parsed by the env) and a JSON tool call ``{"name": ..., "arguments": {...}}``
(parsed here, against the env's tool table). A reply that cannot be turned into an action
becomes an :class:`ActionError`: invalid *format* when the reply does not follow either
form, invalid *action* when it is well formed but names an unknown tool, lacks or
mistypes an argument, or is not allowed now.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol, runtime_checkable

from agentunit_gym.core.finish import FinishReason

ParamType = Literal["string", "integer", "number", "boolean", "array"]

InvalidPolicy = Literal["continue", "terminate"]
"""What an env does with an invalid reply: show the feedback and go on (AgentUnit's loop), or
end the episode with IF/IA (AgentBench's)."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


@dataclass(frozen=True)
class Param:
    """One argument of a tool."""

    name: str
    type: ParamType
    description: str
    required: bool = True


@dataclass(frozen=True)
class ToolSpec:
    """A tool the agent may call.

    ``primary`` names the argument a shorthand ``{"tool": "value"}`` fills, and the one the
    ReAct grammar carries (the bash block, the SQL block, the answer text). ``commits``
    marks tools that end the episode (answer, finish, submit).
    """

    name: str
    description: str
    params: tuple[Param, ...] = ()
    commits: bool = False

    @property
    def primary(self) -> str | None:
        return self.params[0].name if self.params else None

    def json_schema(self) -> dict[str, Any]:
        """The tool in the OpenAI function-calling schema."""
        properties: dict[str, Any] = {}
        for p in self.params:
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.type == "array":
                prop["items"] = {"type": "string"}
            properties[p.name] = prop
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": [p.name for p in self.params if p.required],
                },
            },
        }


class ActionIssue(str, Enum):
    """API-level detail of an invalid reply (AgentUnit's hallucination taxonomy)."""

    NO_CALL = "no_call"
    """No action could be found in the reply."""
    MALFORMED = "malformed"
    """The reply tries to follow a form (a JSON call, an ``Act:`` line) and breaks it."""
    UNKNOWN_TOOL = "unknown_tool"
    """A tool or command keyword the env does not have (a hallucinated tool)."""
    MISSING_PARAMETER = "missing_parameter"
    INVALID_PARAMETER = "invalid_parameter"
    NOT_ALLOWED = "not_allowed"
    """A valid tool that is not allowed in this task or at this point."""
    EXECUTION_EXCEPTION = "execution_exception"
    """The action was accepted but could not be carried out (e.g. an unparsable answer)."""


_NO_ITEM = object()

_FORMAT_ISSUES = {ActionIssue.NO_CALL, ActionIssue.MALFORMED}


@dataclass(frozen=True)
class ActionError:
    """Why a reply is not a valid action; shown to the agent as feedback."""

    issue: ActionIssue
    message: str
    hint: str | None = None
    tool: str | None = None

    @property
    def reason(self) -> FinishReason:
        """``INVALID_FORMAT`` or ``INVALID_ACTION``, the class this error falls in."""
        if self.issue in _FORMAT_ISSUES:
            return FinishReason.INVALID_FORMAT
        return FinishReason.INVALID_ACTION

    def feedback(self) -> str:
        """The observation the agent reads."""
        kind = "Invalid format" if self.reason is FinishReason.INVALID_FORMAT else "Invalid action"
        text = f"{kind}: {self.message}"
        if self.hint:
            text += f" {self.hint}"
        return text

    def to_info(self) -> dict[str, Any]:
        return {
            "reason": self.reason.value,
            "issue": self.issue.value,
            "message": self.message,
            "hint": self.hint or "",
            "tool": self.tool or "",
            "truncated_reply": False,  # the env cannot tell; ClassifyActions sets it from the reply's finish reason
        }


@dataclass
class Execution:
    """What running one non-committing action produced (an env's ``_execute``)."""

    observation: str
    """What the agent reads next."""
    details: dict[str, Any] = field(default_factory=dict)
    """Exit code, timeout, truncation, row count ... (goes to ``info["execution"]``)."""
    error: bool = False
    """Whether the action failed (non-zero exit, SQL error): an agent mistake, not ours."""


@runtime_checkable
class SupportsAdminRun(Protocol):
    """An env that runs domain commands outside the agent's view, with full rights (a shell command
    in the OS sandbox, SQL on the episode database): to plant traps and check state, never a step.
    The OS and DB envs do; :class:`~agentunit_gym.wrappers.traps.InjectTraps` needs it for traps
    that plant or check state."""

    def admin_run(self, command: str) -> Execution:
        """Run ``command``.

        Raises:
            EpisodeStateError: no episode has been started.
        """
        ...


@dataclass(frozen=True)
class Action:
    """A parsed, valid action."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    form: Literal["react", "json"] = "react"
    thought: str = ""
    """Text the agent wrote before the action (its reasoning), if any."""

    def to_info(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": dict(self.arguments), "form": self.form}


def suggest(name: str, candidates: list[str]) -> str | None:
    """A "Did you mean ...?" hint for a near-miss name, or None."""
    close = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.6)
    return f"Did you mean {close[0]!r}?" if close else None


_FENCED_JSON = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```$", re.DOTALL)


def _unfenced(text: str) -> str:
    stripped = text.strip()
    fenced = _FENCED_JSON.match(stripped)
    return fenced.group(1).strip() if fenced else stripped


def looks_like_json_call(text: str) -> bool:
    """Whether the reply is meant as a JSON tool call (an object, bare or fenced)."""
    return _unfenced(text).startswith("{")


def split_json_call(text: str) -> tuple[str, dict[str, Any]] | ActionError:
    """Decode a JSON tool call into its tool name and arguments, not yet checked against a tool table.

    Accepts ``{"name": ..., "arguments": {...}}`` bare or in a json fence, OpenAI's
    ``{"type": "function", "function": {...}}`` wrapper, ``parameters`` for ``arguments``,
    and ``arguments`` as a JSON-encoded string (as OpenAI's API returns them).

    Returns:
        ``(name, arguments)``, or a ``MALFORMED`` :class:`ActionError` saying what is wrong.
    """
    try:
        payload = json.loads(_unfenced(text))
    except (json.JSONDecodeError, RecursionError) as exc:
        return ActionError(
            ActionIssue.MALFORMED,
            f"the reply starts like a JSON tool call but is not valid JSON ({exc}).",
            hint='Send {"name": "<tool>", "arguments": {...}}.',
        )
    if not isinstance(payload, dict):
        return ActionError(ActionIssue.MALFORMED, "a JSON tool call must be an object.")
    if isinstance(payload.get("function"), dict):  # {"type": "function", "function": {...}}
        payload = payload["function"]
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return ActionError(
            ActionIssue.MALFORMED,
            'the JSON tool call has no "name".',
            hint='Send {"name": "<tool>", "arguments": {...}}.',
        )
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ActionError(
                ActionIssue.MALFORMED, f"the arguments of {name!r} are not valid JSON ({exc}).", tool=name
            )
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ActionError(ActionIssue.MALFORMED, f'"arguments" of {name!r} must be an object.', tool=name)
    return name, arguments


def parse_json_call(text: str, tools: Mapping[str, ToolSpec]) -> Action | ActionError:
    """Parse a JSON tool call (see :func:`split_json_call`) and check it against ``tools``."""
    call = split_json_call(text)
    if isinstance(call, ActionError):
        return call
    result = validate_call(*call, tools)
    if isinstance(result, Action):
        return Action(result.tool, result.arguments, form="json")
    return result


def validate_call(name: str, arguments: dict[str, Any], tools: Mapping[str, ToolSpec]) -> Action | ActionError:
    """Check a call's tool name and arguments against the tool table."""
    spec = tools.get(name)
    if spec is None:
        return ActionError(
            ActionIssue.UNKNOWN_TOOL,
            f"there is no tool named {name!r}; the tools are {', '.join(sorted(tools))}.",
            hint=suggest(name, list(tools)),
            tool=name,
        )
    known = {p.name for p in spec.params}
    extra = sorted(set(arguments) - known)
    if extra:
        return ActionError(
            ActionIssue.INVALID_PARAMETER,
            f"{name!r} has no parameter {extra[0]!r}; its parameters are {sorted(known) or 'none'}.",
            hint=suggest(extra[0], sorted(known)),
            tool=name,
        )
    clean: dict[str, Any] = {}
    for p in spec.params:
        if p.name not in arguments:
            if p.required:
                return ActionError(
                    ActionIssue.MISSING_PARAMETER,
                    f"{name!r} needs the parameter {p.name!r} ({p.description}).",
                    tool=name,
                )
            continue
        value = arguments[p.name]
        if p.type == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # a number where text is expected is harmless: accept it
        if not isinstance(value, _JSON_TYPES[p.type]) or (p.type in ("integer", "number") and isinstance(value, bool)):
            return ActionError(
                ActionIssue.INVALID_PARAMETER,
                f"the parameter {p.name!r} of {name!r} must be of type {p.type}, got {type(value).__name__}.",
                tool=name,
            )
        if isinstance(value, list):
            # Arrays are of strings (answers, values): numbers become text; anything else is a mistake.
            bad = next((item for item in value if isinstance(item, bool) or not isinstance(item, (str, int, float))),
                       _NO_ITEM)
            if bad is not _NO_ITEM:
                return ActionError(
                    ActionIssue.INVALID_PARAMETER,
                    f"the items of {p.name!r} of {name!r} must be strings, got {type(bad).__name__}.",
                    tool=name,
                )
            value = [item if isinstance(item, str) else str(item) for item in value]
        clean[p.name] = value
    return Action(name, clean, form="json")


def render_json_call(tool: str, arguments: dict[str, Any]) -> str:
    """The JSON tool-call text for a call (what a tool-calling agent sends)."""
    return json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False)
