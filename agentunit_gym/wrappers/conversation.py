"""Open each episode as the benchmark does: :class:`StartConversation`.

Under ``eval --protocol agentbench`` with an AgentBench checkout, the evaluator puts this
wrapper right over the env (below the evaluation stack, so the trace records what the agent
read). It changes the reset only; steps pass through.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.wrappers.info import agent_env

CHAT_HEAD_KEY = "chat_head"
"""The reset ``info`` key holding the opening turns (OpenAI chat messages) an agent starts with."""

PROMPT_SOURCE_KEY = "prompt_source"
"""The reset ``info`` key naming where the opening turns were read."""


class StartConversation(gym.Wrapper[str, str, str, str]):
    """Give the agent a benchmark's opening turns and the task in the benchmark's words.

    On reset, ``info["chat_head"]`` holds the opening turns (instructions, acknowledgement,
    one-shot) as chat messages and the observation is the task turn
    (:meth:`ScriptedConversation.task_turn`); a chat agent
    (:class:`~agentunit_gym.core.chat.ChatTranscript`) then starts from those turns instead of
    its own system message and worked example. Steps are unchanged.

    Example (not run: it needs an AgentBench checkout)::

        conversation = get_domain("kg").protocols["agentbench"].conversation(Path("AgentBench"))
        env = StartConversation(gym.make("AgentUnit/KG-v0"), conversation)
        obs, info = env.reset()   # obs == "A new question: ...", info["chat_head"][0]["role"] == "user"
    """

    def __init__(self, env: gym.Env[str, str], conversation: ScriptedConversation) -> None:
        super().__init__(env)
        self.conversation = conversation

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        task = agent_env(self.env).task
        if task is None:  # an env always has a task after reset; keep its own words if not
            return observation, info
        turn = self.conversation.task_turn(task, observation)
        return turn, {**info, CHAT_HEAD_KEY: self.conversation.messages(),
                      PROMPT_SOURCE_KEY: self.conversation.source}


__all__ = ["CHAT_HEAD_KEY", "PROMPT_SOURCE_KEY", "StartConversation"]
