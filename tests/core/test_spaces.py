"""UnicodeText under gymnasium's flatten utilities, and max_episode_steps given to gym.make."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentunit_gym  # noqa: F401 - registers the ids
from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.spaces import UnicodeText
from agentunit_gym.errors import ConfigError


@pytest.mark.parametrize("text", ["", "plain", "a\x00b", "é中文🙂\n\t", "x" * 12])
def test_a_bounded_space_flattens_to_code_points_and_back(text: str) -> None:
    space = UnicodeText(max_length=12)
    flat = gym.spaces.flatten(space, text)
    assert flat.shape == (12,) and flat.dtype == np.int32
    assert list(flat[: len(text)]) == [ord(c) for c in text] and all(flat[len(text):] == -1)
    assert gym.spaces.flatten_space(space).contains(flat)
    assert gym.spaces.flatdim(space) == 12
    assert gym.spaces.unflatten(space, flat) == text


def test_too_long_text_is_refused() -> None:
    with pytest.raises(ConfigError, match="not an element"):
        gym.spaces.flatten(UnicodeText(max_length=3), "abcd")


def test_a_real_observation_of_an_unbounded_space_raises_a_clear_error() -> None:
    env = gym.make("AgentUnit/DB-v0", backend="sqlite")
    try:
        observation, _ = env.reset(seed=0)
        for call in (lambda: gym.spaces.flatten(env.observation_space, observation),
                     lambda: gym.spaces.flatten_space(env.action_space),
                     lambda: gym.spaces.flatdim(env.observation_space)):
            with pytest.raises(ConfigError, match="no fixed length"):
                call()
    finally:
        env.close()


def test_max_episode_steps_of_gym_make_ends_as_tle_with_a_score() -> None:
    env = gym.make("AgentUnit/DB-v0", backend="sqlite", max_episode_steps=2)
    try:
        env.reset(seed=0)
        sql = "Action: Operation\n```sql\nSELECT 1;\n```"
        _, reward, terminated, truncated, info = env.step(sql)
        assert (terminated, truncated, info["finish_reason"]) == (False, False, "")
        _, reward, terminated, truncated, info = env.step(sql)
        assert (terminated, truncated) == (False, True)
        assert info["finish_reason"] is FinishReason.TASK_LIMIT and info["limit"] is LimitKind.STEPS
        assert info["score"]["success"] is False and reward == 0.0
        assert env.unwrapped.finish_reason is FinishReason.TASK_LIMIT  # type: ignore[attr-defined]
        # The next episode starts clean.
        _, info = env.reset(seed=1)
        assert info["finish_reason"] == ""
    finally:
        env.close()
