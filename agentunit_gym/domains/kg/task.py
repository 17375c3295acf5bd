"""The KG task spec: a question, its topic entities, the reference action sequence and the gold answer.

A KG task follows AgentBench's knowledge-graph item: ``question``, ``entities`` (shown name
-> entity id), ``actions`` (the tool calls that reach the answer, written as AgentBench
writes them: ``get_neighbors(m.0abc,some.relation)``), the gold ``answer`` (entity ids, or a
number for a count) and optionally its ``s_expression``.

When a task gives no ``reference_solution``, one is derived from ``actions``: each call
becomes a step, and a last ``final_answer`` commits the last variable made.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, model_validator

from agentunit_gym.tasks.spec import AnswerKey, TaskSpec

TOOL_PARAMS: dict[str, tuple[str, ...]] = {
    "get_relations": ("variable",),
    "get_neighbors": ("variable", "relation"),
    "intersection": ("variable1", "variable2"),
    "get_attributes": ("variable",),
    "argmax": ("variable", "attribute"),
    "argmin": ("variable", "attribute"),
    "count": ("variable",),
}
"""The seven KG tools and their parameters, in AgentBench's argument order."""

MAKES_VARIABLE = frozenset({"get_neighbors", "intersection", "argmax", "argmin", "count"})
"""Tools whose call makes a new variable (``#k``)."""

_CALL = re.compile(r"^\s*(\w+)\((.*)\)\s*$", re.DOTALL)


def split_call(text: str) -> tuple[str, list[str]]:
    """``"get_neighbors(m.x, rel)"`` -> ``("get_neighbors", ["m.x", "rel"])`` (AgentBench splits on commas).

    Raises:
        ValueError: not a call of one of the seven tools with the right number of arguments.
    """
    match = _CALL.match(text)
    if match is None:
        raise ValueError(f"not a tool call: {text!r}")
    name, inside = match.group(1), match.group(2)
    if name not in TOOL_PARAMS:
        raise ValueError(f"unknown tool {name!r} in {text!r}; the tools are {', '.join(TOOL_PARAMS)}")
    arguments = [a for a in re.split(r"\s*,\s*", inside.strip())]
    if len(arguments) != len(TOOL_PARAMS[name]):
        raise ValueError(f"{name} takes {len(TOOL_PARAMS[name])} argument(s), {text!r} gives {len(arguments)}")
    return name, arguments


class KGTask(TaskSpec):
    """A KG question (AgentBench knowledge-graph semantics)."""

    entities: dict[str, str] = Field(default_factory=dict)
    """Topic entities: the name shown to the agent -> its entity id. The agent may call a tool
    with either."""
    actions: tuple[str, ...] = Field(min_length=1)
    """The reference tool calls, e.g. ``get_relations(m.country_fr)``; the last variable made is the answer."""
    answer: tuple[str, ...] = Field(min_length=1)
    """Gold answer: entity ids, or one number for a count."""
    answer_names: tuple[str, ...] = ()
    """Display names of the gold answer (for reports; not graded)."""
    s_expression: str | None = None
    """The question's logical form, as AgentBench gives it (informative)."""
    graph: str = "bundled"
    """The graph the task is about: ``bundled`` (runs on every backend) or ``freebase`` (a
    Freebase endpoint given by the user)."""

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "question" in data and "instruction" not in data:
            data["instruction"] = data.pop("question")
        if isinstance(data.get("answer"), (list, tuple)):
            data["answer"] = [str(a) for a in data["answer"]]
        elif isinstance(data.get("answer"), (str, int, float)):
            data["answer"] = [str(data["answer"])]
        if not data.get("reference_solution") and isinstance(data.get("actions"), (list, tuple)):
            steps: list[dict[str, Any]] = []
            made = 0
            for text in data["actions"]:
                try:
                    name, arguments = split_call(str(text))
                except ValueError:
                    continue  # the after-validator reports it with the field name
                steps.append({name: dict(zip(TOOL_PARAMS[name], arguments, strict=True))})
                made += name in MAKES_VARIABLE
            if made:
                steps.append({"final_answer": {"variable": f"#{made - 1}"}})
            data["reference_solution"] = steps
        return data

    @model_validator(mode="after")
    def _consistent(self) -> KGTask:
        made = 0
        for text in self.actions:
            name, _ = split_call(text)  # raises ValueError: pydantic reports it on this task
            made += name in MAKES_VARIABLE
        if made == 0:
            raise ValueError("actions make no variable, so nothing can be the answer")
        if self.graph not in ("bundled", "freebase"):
            raise ValueError(f"graph must be 'bundled' or 'freebase', got {self.graph!r}")
        return self

    @property
    def question(self) -> str:
        return self.instruction

    def answer_key(self) -> AnswerKey:
        """The gold entity ids (or the count). The agent commits a variable, not these values:
        scoring needs the variable's entities, which the env reads from the graph
        (``score.components.answer``), so the key is not in the reply's text."""
        return AnswerKey(json.dumps(list(self.answer), ensure_ascii=False), in_reply=False)
