"""The base env stays small (issue 35): what it does not own lives in its parts, not in it."""

from __future__ import annotations

import ast
from pathlib import Path

import agentunit_gym
from agentunit_gym.core.env import AgentEnv

PACKAGE = Path(agentunit_gym.__file__).parent
ENV_MODULE = PACKAGE / "core" / "env.py"

MAX_METHODS = 25
"""Every ``def`` in ``AgentEnv``'s body: hooks, properties and dunders included."""
MAX_ENV_LINES = 400
MAX_MODULE_LINES = 600


def _methods_of(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return [n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_counter_counts_every_def() -> None:
    source = "class AgentEnv:\n    x = 1\n    @property\n    def a(self): ...\n    def __del__(self): ...\n" \
             "    async def b(self): ...\n    class Inner:\n        def c(self): ...\n"
    assert _methods_of(source, "AgentEnv") == ["a", "__del__", "b"]


def test_agent_env_has_at_most_25_methods() -> None:
    methods = _methods_of(ENV_MODULE.read_text(encoding="utf-8"), "AgentEnv")
    # The module holds the class the package imports (not a copy elsewhere).
    assert AgentEnv.__module__ == "agentunit_gym.core.env" and "step" in methods and "reset" in methods
    assert len(methods) <= MAX_METHODS, (
        f"AgentEnv has {len(methods)} methods (at most {MAX_METHODS}): {methods}. Put what is not the gymnasium "
        "contract or a hook in the env's parts (core/task_pool.py, core/action_codec.py, core/backend_handle.py).")


def test_the_env_module_and_its_parts_stay_short() -> None:
    lines = len(ENV_MODULE.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_ENV_LINES, f"core/env.py has {lines} lines (at most {MAX_ENV_LINES})"
    parts = ["task_pool.py", "action_codec.py", "backend_handle.py", "domain.py", "domain_metrics.py"]
    long = {name: n for name in parts
            if (n := len((PACKAGE / "core" / name).read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
