"""A tiny in-memory domain env for testing the core without any backend."""

from __future__ import annotations

import re
from operator import methodcaller
from typing import Any

from agentunit_gym.core import Action, ActionError, ActionIssue, AgentEnv, Execution, Param, Score, ToolSpec
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.domain import BackendSpec, Domain, EnvSpec, Prompt
from agentunit_gym.tasks.spec import TaskSpec


class ToyTask(TaskSpec):
    answer: str = "42"


TOY_TASKS = [
    ToyTask(id="t1", instruction="Say 42.", answer="42", reference_solution=({"echo": "hi"}, {"answer": "42"})),  # type: ignore[arg-type]
    ToyTask(id="t2", instruction="Say 7.", answer="7", reference_solution=({"answer": "7"},)),  # type: ignore[arg-type]
    ToyTask(id="t3", instruction="Only on other.", answer="1", backends=("other",)),
]


TOY_DOMAIN = Domain(
    name="toy",
    title="Toy",
    envs=(EnvSpec("AgentUnitTest/Toy-v0", "tests.core.toy:ToyEnv"),),
    step_limit=4,
    backends=(BackendSpec("toy", "in memory", embedded=True),),
    task_model=ToyTask,
    prompt=Prompt(system="You say numbers."),
)
"""The toy env's description (not registered: the toy envs are made directly or by the tests' own ids)."""


class ToyBackend:
    """The toy env's backend: counts its starts and closes."""

    kind = "toy"

    def __init__(self) -> None:
        self.started = 0
        self.closed = 0

    def start(self) -> None:
        self.started += 1

    def close(self) -> None:
        self.closed += 1


class ToyEnv(AgentEnv[ToyTask]):
    DOMAIN = TOY_DOMAIN
    backend_class: type[ToyBackend] = ToyBackend
    """What the env opens (a subclass's backend may record its starts elsewhere)."""
    grammar = "Act: echo(<text>) or Act: answer(<text>)"
    tools = (
        ToolSpec("echo", "Echo text back.", (Param("text", "string", "what to echo"),)),
        ToolSpec("answer", "Commit an answer.", (Param("text", "string", "the answer"),), commits=True),
    )

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("tasks", TOY_TASKS)
        super().__init__(**kwargs)
        self.released = 0
        self.toy_backend = self.backend_class()
        self.backend = BackendHandle.owned(self.toy_backend, reopen=self.backend_class, warm=methodcaller("start"))

    @property
    def closed_backend(self) -> int:
        """How many times the env closed its backend."""
        return self.toy_backend.closed

    @property
    def backend_name(self) -> str:
        return "toy"

    def _start_episode(self, task: ToyTask) -> str:
        return f"Task: {task.instruction}"

    def _parse_react(self, text: str) -> Action | ActionError:
        matches = re.findall(r"Act:\s*(\w+)\((.*?)\)", text, re.DOTALL)
        if not matches:
            return ActionError(ActionIssue.NO_CALL, "no 'Act:' line found.")
        tool, arg = matches[-1]
        if tool not in self.tool_table:
            return ActionError(ActionIssue.UNKNOWN_TOOL, f"unknown tool {tool!r}.", tool=tool)
        return Action(tool, {"text": arg})

    def _execute(self, action: Action) -> Execution:
        text = action.arguments["text"]
        return Execution(text, {"length": len(text)}, error=text == "fail")

    def _score(self, action: Action | None) -> Score:
        assert self.task is not None
        if action is None:
            return Score.failed("no answer")
        ok = action.arguments["text"].strip() == self.task.answer
        return Score(reward=float(ok), success=ok, components={"exact_match": ok})

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        return f"Act: {tool}({arguments['text']})"

    def _end_episode(self) -> None:
        self.released += 1
