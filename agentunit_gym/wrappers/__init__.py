"""Wrappers: the AgentUnit discipline on top of any AgentUnit env, one concern each.

See docs/wrappers.md for the stack order, each wrapper's options, the trace schema and the
trap library format.
"""

from agentunit_gym.wrappers.base import EpisodeHooks, EpisodeWrapper, Layer, reward_of
from agentunit_gym.wrappers.chat import ChatMessages
from agentunit_gym.wrappers.classify import ClassifyActions
from agentunit_gym.wrappers.context import (
    ApproxTokenCounter,
    LimitContext,
    TiktokenCounter,
    TokenCounter,
    TokenizersCounter,
    make_token_counter,
)
from agentunit_gym.wrappers.ending import end_episode
from agentunit_gym.wrappers.limits import EndTruncatedEpisode, LimitEpisode
from agentunit_gym.wrappers.loops import DetectLoops
from agentunit_gym.wrappers.rewards import ShapeReward, format_penalty, partial_credit, terminal_reward
from agentunit_gym.wrappers.stack import make_eval_env
from agentunit_gym.wrappers.trace import RecordTrace
from agentunit_gym.wrappers.traps import InjectTraps, Trap, TrapLibrary, load_trap_library

__all__ = [
    "ApproxTokenCounter",
    "ChatMessages",
    "ClassifyActions",
    "DetectLoops",
    "EndTruncatedEpisode",
    "EpisodeHooks",
    "EpisodeWrapper",
    "InjectTraps",
    "LimitContext",
    "Layer",
    "LimitEpisode",
    "RecordTrace",
    "ShapeReward",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizersCounter",
    "Trap",
    "TrapLibrary",
    "end_episode",
    "format_penalty",
    "load_trap_library",
    "make_eval_env",
    "make_token_counter",
    "partial_credit",
    "reward_of",
    "terminal_reward",
]
