"""The small base every AgentUnit wrapper builds on: explicit end-of-episode hooks, and one
helper that ends the episode from inside ``step`` and returns its reward.

An episode can end in the base env's ``step`` (a commit, an invalid reply under the
terminate policy, the env's turn limit), in a wrapper's ``step`` (a limit, a loop, the
context), or from outside ``step`` (the evaluator's wall clock, a model's context refusal,
through :func:`~agentunit_gym.wrappers.ending.end_episode`). Every wrapper sees each end
through the same two hooks:

- :meth:`EpisodeWrapper.before_episode_end`: the episode's state still exists (the DB env
  has not dropped its database), e.g. to judge a planted trap;
- :meth:`EpisodeWrapper.on_episode_end`: add this wrapper's entries to the end ``info``.

Example::

    class CountSteps(EpisodeWrapper):
        def reset(self, *, seed=None, options=None):
            self.count = 0
            return self.env.reset(seed=seed, options=options)

        def step(self, action):
            self.count += 1
            observation, reward, terminated, truncated, info = self.env.step(action)
            if self.count >= 3 and not (terminated or truncated):
                ended = self.end_episode_here(FinishReason.TASK_LIMIT, "three steps", info, LimitKind.STEPS)
                if ended is not None:
                    reward, truncated = ended, True
            return observation, reward, terminated, truncated, info

        def on_episode_end(self, info):
            info["count"] = self.count
            return info
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason, LimitKind


class EpisodeWrapper(gym.Wrapper[str, str, str, str]):
    """A wrapper over an AgentUnit env that takes part in every episode end.

    Subclasses override the hooks they need; the defaults do nothing.
    """

    def before_episode_end(self) -> None:
        """Called before the base env ends an episode from outside ``step`` (innermost wrapper
        first), while the episode's state still exists."""

    def on_episode_end(self, info: dict[str, Any]) -> dict[str, Any]:
        """Add this wrapper's entries to the end ``info`` and return it. Called once per episode:
        by :func:`~agentunit_gym.wrappers.ending.end_episode` (innermost first), or by the
        wrapper's own ``step`` on the final step when the end came from below."""
        return info

    def end_episode_here(
        self, reason: FinishReason, detail: str, info: dict[str, Any], limit: LimitKind | None = None
    ) -> float | None:
        """End the running episode from this wrapper's ``step``, through the stack below it.

        The wrappers inside this one record the end (their hooks run); the end entries
        (``finish_reason``, ``score``, ``finish_detail`` ...) and ``limit`` are merged into ``info``.

        Args:
            reason: the finish reason.
            detail: why, for the trace's ``finish_detail``.
            info: this step's ``info``, updated in place.
            limit: which limit, for ``TASK_LIMIT`` ends.

        Returns:
            The episode's reward (its score's) when this call ended it; None when the episode
            had already ended (the first end wins and ``info`` is left as it is).
        """
        from agentunit_gym.wrappers.ending import end_episode_now  # ending imports this module

        if not end_episode_now(self.env, reason, detail, info):
            return None
        if limit is not None:
            info["limit"] = limit
        return reward_of(info)


def reward_of(info: dict[str, Any], default: float = 0.0) -> float:
    """The reward an end ``info`` carries (its score's), else ``default``."""
    score = info.get("score")
    if isinstance(score, dict) and "reward" in score:
        return float(score["reward"])
    return default


__all__ = ["EpisodeWrapper", "reward_of"]
