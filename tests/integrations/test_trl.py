"""docs/training.md's TRL environment class, checked with TRL's own pieces (where trl is installed).

TRL makes an ``environment_factory`` instance, lists its public methods as tools and renders
their schemas with ``transformers.utils.get_json_schema``; the reward comes from
``get_reward()``. A training run needs a model, so this checks the class: its tool schemas
match the env's tools, and an oracle episode through the methods earns 1 (a wrong answer 0).
The docs' class plays a server session (``AgentUnit/Remote-v0``); here ``make_env`` gives an
in-process env instead. trl needs torch, so it is not in the test extra (docs/training.md).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("trl", reason="trl (and torch) are not in the test extra; see docs/training.md, TRL")

from transformers.utils import get_json_schema  # noqa: E402

import agentunit_gym  # noqa: E402,F401

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"
ENV_ID, BACKEND = "AgentUnit/DB-v0", "sqlite"


def _docs_class() -> type:
    section = DOCS.read_text(encoding="utf-8").split("### TRL\n", 1)[1]
    code = re.search(r"```python\n(.*?)```\n", section, re.DOTALL)
    assert code is not None
    scope: dict[str, Any] = {}
    exec(compile(code.group(1), "docs/training.md", "exec"), scope)
    scope["make_env"] = lambda: gym.make(ENV_ID, backend=BACKEND)  # in place of a server session
    return scope["AgentUnitDB"]  # type: ignore[no-any-return]


def _tools_as_trl_sees_them(instance: Any) -> list[Any]:
    # TRL's discovery: functions of the class, minus reset, get_reward and private names.
    return [getattr(instance, name) for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_the_tool_schemas_trl_renders_match_the_envs_tools() -> None:
    instance = _docs_class()()
    try:
        observation = instance.reset()
        assert observation
        _, info = instance.env.reset()
        env_tools = {t["function"]["name"]: t["function"] for t in info["tools"]}
        schemas = [get_json_schema(method)["function"] for method in _tools_as_trl_sees_them(instance)]
        assert {s["name"] for s in schemas} == set(env_tools)  # every tool of the domain, no other
        for schema in schemas:
            expected = env_tools[schema["name"]]["parameters"]
            assert schema["parameters"].get("required", []) == expected["required"]
            for name, spec in expected["properties"].items():  # (a tool without parameters has none)
                assert schema["parameters"]["properties"][name]["type"] == spec["type"]
                assert schema["parameters"]["properties"][name]["description"] == spec["description"]
    finally:
        instance.env.close()


@pytest.mark.parametrize("correct", [True, False], ids=["oracle", "wrong-answer"])
def test_an_episode_through_the_tool_methods_earns_the_env_score(correct: bool) -> None:
    instance = _docs_class()()
    try:
        base: Any = instance.env.unwrapped
        task = next(t for t in base.tasks if not any(s.from_output for s in t.reference_solution))
        instance.reset(task_id=task.id, prompt="ignored")
        for step in task.reference_solution:
            arguments = dict(step.arguments) if isinstance(step.arguments, dict) \
                else {base.tool_table[step.tool].primary: step.arguments}
            if step.tool == "submit_answer" and not correct:
                arguments = {"answer": ["certainly not this"]}
            instance_method = getattr(instance, step.tool)
            instance_method(**arguments)
        assert instance.done is True and instance.get_reward() == (1.0 if correct else 0.0)
        with pytest.raises(ValueError, match="over"):
            instance.execute_sql(query="SELECT 1")
        instance.reset(task_id=task.id)  # TRL reuses an instance: the next episode starts clean
        assert instance.done is False and instance.get_reward() == 0.0
    finally:
        instance.env.close()
