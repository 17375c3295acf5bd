"""Core: the base env, text spaces, actions, finish reasons and scores."""

from agentunit_gym.core.actions import Action, ActionError, ActionIssue, Param, ToolSpec
from agentunit_gym.core.env import AgentEnv, Execution
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.info import ResetInfo, ScoreInfo, StepInfo, StepTiming
from agentunit_gym.core.score import Score
from agentunit_gym.core.spaces import UnicodeText

__all__ = [
    "Action",
    "ActionError",
    "ActionIssue",
    "AgentEnv",
    "Execution",
    "FinishReason",
    "Param",
    "ResetInfo",
    "Score",
    "ScoreInfo",
    "StepInfo",
    "StepTiming",
    "ToolSpec",
    "UnicodeText",
]
