"""Replay a task's reference solution through an env, as the oracle agent does (for tests)."""

from __future__ import annotations

from typing import Any

from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.reference import OutputReply
from agentunit_gym.tasks.spec import TaskSpec


def replay(env: AgentEnv[Any], task: TaskSpec) -> tuple[float, dict[str, Any]]:
    """The final reward and info of one episode of ``task`` driven by its reference solution."""
    observation, info = env.reset(options={"task": task})
    reward = 0.0
    for step in task.reference_solution:
        reply = env.render_action(step, "react")
        if isinstance(reply, OutputReply):
            reply = reply.complete(observation)
        observation, reward, terminated, truncated, info = env.step(reply)
        if terminated or truncated:
            break
    return float(reward), info
