"""Classify every reply (valid action, invalid format, invalid action) and apply the invalid-reply policy."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, SupportsFloat, get_args

import gymnasium as gym

from agentunit_gym.core.actions import suggest
from agentunit_gym.core.env import InvalidPolicy
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.base import EpisodeWrapper, Layer
from agentunit_gym.wrappers.info import add_flags, agent_env, derive_flags, reset_info, step_info
from agentunit_gym.wrappers.keys import ReplyClass, WrappedResetInfo, WrappedStepInfo

TRUNCATED_REPLY = "truncated_reply"
"""The ``action_error`` key (True) of an invalid reply the model's server cut at its token limit
(``finish_reason == "length"``): the reply is still IF, but the model ran out of tokens rather
than chose a wrong format."""

TRUNCATED_REPLY_HINT = ("Your reply was cut at the token limit before the action ended: keep the thinking short "
                        "and write the action early.")


def is_truncated_reply(action: object) -> bool:
    """The reply is an :class:`AgentReply` whose model stopped at its token limit (finish reason ``length``)."""
    return isinstance(action, AgentReply) and action.usage is not None and action.usage.finish_reason == "length"


REPLY_CLASSES: tuple[ReplyClass, ...] = get_args(ReplyClass)
"""Values of ``info["reply_class"]``: a valid action, the two invalid classes, or a reply a
limit wrapper did not run (it arrived after the deadline or the prompt overflowed)."""

# A word right after an action marker ("Act: anwser(...)", "Action: Operaton"), for near-miss hints
# when the env's parser reports no call or a malformed one.
_MARKER_WORD = re.compile(r"\b(?:act|action)\s*:\s*([A-Za-z_][\w-]*)", re.IGNORECASE)


class ClassifyActions(EpisodeWrapper, gym.utils.RecordConstructorArgs):
    """Put the class of every reply in ``info`` and apply the policy for invalid ones.

    ``info["reply_class"]`` is ``action``, ``invalid_format`` or ``invalid_action``;
    ``info["action_error"]`` keeps the API-level detail from the env (issue ``no_call``,
    ``malformed``, ``unknown_tool``, ``missing_parameter``, ``invalid_parameter``,
    ``not_allowed``, ``execution_exception``), and this wrapper adds a near-miss hint when
    the env gave none ("Did you mean 'answer'?") to the detail and to the observation.
    A reply the model's server cut at its token limit (an :class:`AgentReply` whose
    ``usage.finish_reason`` is ``length``) that is not an action gets
    ``action_error["truncated_reply"] = True`` (and, if it ends the episode, the finish detail
    says so): still IF, told apart from a format the model chose wrongly.
    ``info["flags"]`` gets INVALID_FORMAT / INVALID_ACTION, HALLUCINATION for an unknown
    tool, EXECUTION_ERROR, TIMEOUT and TRUNCATED. ``info["invalid_count"]`` counts the
    episode's invalid replies.

    Policies: ``"continue"`` (AgentUnit's loop: the agent reads the feedback and goes on)
    or ``"terminate"`` (AgentBench: the first invalid reply ends the episode with IF or
    IA, ``terminated=True``). ``max_invalid`` generalises both: end after that many
    invalid replies in the episode. ``ending_issues`` narrows which invalid replies count
    toward ending it (by ``action_error["issue"]``), for a benchmark whose loop goes on after
    some of them: under ``--protocol agentbench`` the domain's
    :attr:`~agentunit_gym.core.domain.ProtocolPreset.ending_issues` says which. The others are
    still classified, flagged and counted in ``invalid_count``.

    Example:
        >>> import gymnasium as gym
        >>> env = ClassifyActions(gym.make("AgentUnit/DB-v0", backend="sqlite"), policy="terminate")
        >>> _ = env.reset(options={"task_id": "db-weather-03"})
        >>> _, _, terminated, _, info = env.step('{"name": "launch", "arguments": {}}')  # no such tool
        >>> terminated, info["reply_class"], info["finish_reason"].abbreviation, info["invalid_count"]
        (True, 'invalid_action', 'IA', 1)
        >>> env.close()

    Args:
        env: a stack over an AgentUnit env (its own ``invalid_action`` may stay "continue").
        policy: ``"continue"`` or ``"terminate"``.
        max_invalid: end the episode at this many invalid replies; overrides ``policy``.
        hints: add near-miss hints.
        ending_issues: the issues that may end the episode; None for every invalid reply.

    Raises:
        ConfigError: an unknown policy or ``max_invalid`` below 1.
    """

    layer = Layer.CLASSIFY

    def __init__(self, env: gym.Env[str, str], policy: InvalidPolicy = "continue", max_invalid: int | None = None,
                 hints: bool = True, ending_issues: Collection[str] | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, policy=policy, max_invalid=max_invalid, hints=hints,
                                                 ending_issues=ending_issues)
        EpisodeWrapper.__init__(self, env)
        if policy not in ("continue", "terminate"):
            raise ConfigError(f"policy must be 'continue' or 'terminate', got {policy!r}.")
        if max_invalid is not None and (not isinstance(max_invalid, int) or max_invalid < 1):
            raise ConfigError(f"max_invalid must be an integer of at least 1 (or None), got {max_invalid!r}.")
        self.policy = policy
        self.max_invalid = max_invalid if max_invalid is not None else (1 if policy == "terminate" else None)
        self.hints = hints
        self.ending_issues = None if ending_issues is None else frozenset(ending_issues)
        self._tools = sorted(agent_env(env).tool_table)
        self._invalid = 0
        self._ending = 0  # invalid replies that count toward ending the episode

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, WrappedResetInfo]:
        observation, raw = self.env.reset(seed=seed, options=options)  # a refused reset changes nothing here
        self._invalid = self._ending = 0
        info = reset_info(raw)
        info["invalid_policy"] = self.policy
        return observation, info

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        error = info.get("action_error")
        if isinstance(error, dict) and error:  # {}: the reply was a valid action
            self._invalid += 1
            if self.ending_issues is None or str(error.get("issue", "")) in self.ending_issues:
                self._ending += 1
            reply_class: ReplyClass = (
                "invalid_action" if error.get("reason") == FinishReason.INVALID_ACTION.value else "invalid_format")
            if is_truncated_reply(action):
                error = {**error, TRUNCATED_REPLY: True}
                if self.hints:  # the cut is the news, whatever the env's parser made of the remains
                    error["hint"] = TRUNCATED_REPLY_HINT
                    observation = f"{observation} {TRUNCATED_REPLY_HINT}"
                info["action_error"] = error
            if self.hints and not error.get("hint"):
                hint = self._hint(error, action)
                if hint:
                    error = {**error, "hint": hint}
                    info["action_error"] = error
                    observation = f"{observation} {hint}"
            info["reply_class"] = reply_class
            if self.max_invalid is not None and self._ending >= self.max_invalid and not (terminated or truncated):
                reason = FinishReason(reply_class)
                noun = "reply" if self._ending == 1 else "replies"
                detail = f"{self._ending} invalid {noun}: {error.get('message', '')}"
                if error.get(TRUNCATED_REPLY):
                    detail += f" ({TRUNCATED_REPLY}: the model's reply was cut at its token limit)"
                ended = self.end_episode_here(reason, detail, info)
                if ended is not None:
                    terminated, reward = True, ended
        elif info.get("skipped"):
            info["reply_class"] = "skipped"
        else:
            info["reply_class"] = "action"
        add_flags(info, *derive_flags(info))
        info["invalid_count"] = self._invalid
        return observation, reward, terminated, truncated, info

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Record the episode's invalid-reply count in the end ``info`` (for
        :func:`~agentunit_gym.wrappers.ending.end_episode`; ``step`` records it every step)."""
        info["invalid_count"] = self._invalid
        return info

    def _hint(self, error: Mapping[str, Any], action: str) -> str | None:
        tool = error.get("tool")
        if isinstance(tool, str) and tool and tool not in self._tools:
            return suggest(tool, self._tools)
        if error.get("issue") in ("no_call", "malformed") and isinstance(action, str):
            for word in reversed(_MARKER_WORD.findall(action[-10_000:])):
                if word not in self._tools:
                    found = suggest(word, self._tools)
                    if found:
                        return found
            return f"Write the action as: {agent_env(self.env).grammar}"
        return None
