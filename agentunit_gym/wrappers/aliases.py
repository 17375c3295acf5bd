"""Show agents another benchmark release's tool names and map their calls onto the env's tools.

AgentBench FC names the OS shell tool ``bash_action`` and the DB answer tool
``commit_final_answer``; the envs call them ``bash`` and ``submit_answer``. Under
``eval --protocol agentbench-fc`` each env is wrapped in :class:`RenameTools` with the
aliases its domain declares (:attr:`~agentunit_gym.core.domain.ProtocolPreset.tools`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym

from agentunit_gym.core.actions import looks_like_json_call, split_json_call
from agentunit_gym.core.domain import ToolAlias
from agentunit_gym.core.trace import AgentReply


class RenameTools(gym.Wrapper[str, str, str, str]):
    """Replace ``info["tools"]`` with ``aliases``' schemas and translate JSON calls of an alias.

    A call of an alias becomes a call of its env tool (arguments renamed, dropped ones
    removed); any other reply reaches the env unchanged, so a wrong name is still an
    invalid action there. ``info["protocol_tools"]`` is True, so an agent knows the env's
    own worked example (written with the env's names) does not apply.

    Example:
        >>> import gymnasium as gym
        >>> from agentunit_gym.core.registry import get_domain
        >>> aliases = get_domain("db").protocols["agentbench-fc"].tools
        >>> env = RenameTools(gym.make("AgentUnit/DB-v0", backend="sqlite"), aliases)
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> [tool["function"]["name"] for tool in info["tools"]], info["protocol_tools"]
        (['execute_sql', 'commit_final_answer'], True)
        >>> *_, info = env.step('{"name": "commit_final_answer", "arguments": {"answers": ["-3.2"]}}')
        >>> info["action"]["tool"], info["score"]["success"]  # the env's own answer tool ran
        ('submit_answer', True)
        >>> env.close()
    """

    def __init__(self, env: gym.Env[str, str], aliases: Sequence[ToolAlias]) -> None:
        super().__init__(env)
        self._aliases = {a.name: a for a in aliases}
        self._schemas = [json.loads(json.dumps(dict(a.schema), default=dict)) for a in aliases]

    @property
    def aliases(self) -> tuple[ToolAlias, ...]:
        """The tools agents see, in the order given."""
        return tuple(self._aliases.values())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "tools": [dict(s) for s in self._schemas], "protocol_tools": True}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.env.step(self.translate(action))

    def translate(self, action: str) -> str:
        """The env's form of ``action`` when it calls an alias; else ``action`` unchanged."""
        if not isinstance(action, str) or not looks_like_json_call(action):
            return action
        call = split_json_call(action)
        if not isinstance(call, tuple) or call[0] not in self._aliases:
            return action
        alias = self._aliases[call[0]]
        arguments: dict[str, Any] = {}
        for name, value in call[1].items():
            target = alias.arguments.get(name, name)
            if target is not None:
                arguments[target] = value
        translated = json.dumps({"name": alias.tool, "arguments": arguments}, ensure_ascii=False)
        # Keep the agent's usage (an AgentReply is a str that carries it) for the trace.
        return AgentReply(translated, action.usage, action.message) if isinstance(action, AgentReply) else translated


__all__ = ["RenameTools"]
