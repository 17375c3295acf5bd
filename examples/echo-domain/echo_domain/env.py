"""``EchoCorp/Echo-v0``: say the word back. The smallest env on agentunit-gym's base."""

from __future__ import annotations

import re
from typing import Any

from agentunit_gym.core import Action, ActionError, ActionIssue, AgentEnv, Execution, Param, Score, ToolSpec
from echo_domain import DOMAIN
from echo_domain.task import EchoTask

_ACT = re.compile(r"Act:\s*(\w+)\((.*?)\)", re.DOTALL)


class EchoEnv(AgentEnv[EchoTask]):
    """Say the word you are shown: ``Act: say(<word>)`` commits, ``Act: look()`` shows it again."""

    DOMAIN = DOMAIN  # name, task model, step limit and suite come from the description
    grammar = "Act: say(<word>) to answer, or Act: look() to read the word again"
    tools = (
        ToolSpec("look", "Read the word again."),
        ToolSpec("say", "Say the word; ends the episode.", (Param("word", "string", "the word"),), commits=True),
    )

    def __init__(self, *, backend: str = "auto", **kwargs: Any) -> None:
        DOMAIN.check_backend(backend)  # "auto" or a name the description lists; nothing to open
        super().__init__(**kwargs)

    @property
    def backend_name(self) -> str:
        return "inline"

    def _start_episode(self, task: EchoTask) -> str:
        return f"{self.grammar}\n\nTask: {task.instruction}"

    def _parse_react(self, text: str) -> Action | ActionError:
        found = _ACT.findall(text)
        if not found:
            return ActionError(ActionIssue.NO_CALL, "no 'Act:' line found.", hint=self.grammar)
        tool, argument = found[-1]
        if tool not in self.tool_table:
            return ActionError(ActionIssue.UNKNOWN_TOOL, f"unknown action {tool!r}.", tool=tool)
        return Action(tool, {"word": argument.strip()} if tool == "say" else {})

    def _execute(self, action: Action) -> Execution:
        assert self.task is not None
        return Execution(f"The word is {self.task.word!r}.")

    def _score(self, action: Action | None) -> Score:
        assert self.task is not None
        said = action.arguments.get("word") if action is not None else None
        ok = said == self.task.word
        return Score(reward=float(ok), success=ok, components={"exact_match": ok},
                     detail="said the word" if ok else f"said {said!r}")

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        return f"Act: {tool}({arguments.get('word', '')})"
