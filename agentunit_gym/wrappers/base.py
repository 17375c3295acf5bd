"""The small base every AgentUnit wrapper builds on: explicit end-of-episode hooks, and one
helper that ends the episode from inside ``step`` and returns its reward.

An episode can end in the base env's ``step`` (a commit, an invalid reply under the
terminate policy, the env's turn limit), in a wrapper's ``step`` (a limit, a loop, the
context), or from outside ``step`` (the evaluator's wall clock, a model's context refusal,
through :func:`end_episode`). Every wrapper sees each end
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
from agentunit_gym.errors import EpisodeStateError
from agentunit_gym.wrappers.info import agent_env


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


def end_episode(env: gym.Env[Any, Any], reason: FinishReason, *, detail: str = "",
                limit: LimitKind | None = None) -> dict[str, Any]:
    """End the running episode of ``env`` for ``reason``, and let every wrapper record the end.

    Use this, not ``env.unwrapped.end_episode``, when something outside ``step`` ends an
    episode (a runner's wall-clock limit, a model's context-window refusal): the trap
    verdict, the context count and the trace then come out as for an episode ended in a step.

    Example::

        env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", trace_dir="traces")
        env.reset(seed=0)
        info = end_episode(env, FinishReason.TASK_LIMIT, detail="wall-clock limit reached")
        trace = info["trace"]  # written to traces/ too

    Args:
        env: a wrapper stack over an AgentUnit env (or the env itself).
        reason: the finish reason (not ``COMPLETE``, which only a committing action reaches).
        detail: why, recorded as the trace's ``finish_detail``.
        limit: which limit ended a ``TASK_LIMIT`` episode (``info["limit"]``), None for none.

    Returns:
        The end info: ``finish_reason``, ``score`` (a dict) and ``finish_detail`` from the
        base env, plus what the wrappers add (``trap``, ``context_tokens``, ``trace`` ...).

    Raises:
        EpisodeStateError: no episode is running (never started, or already ended).
        ConfigError: ``reason`` is ``COMPLETE``, or the stack does not end in an AgentUnit env.
    """
    base = agent_env(env)
    if base.task is None or base.finish_reason is not None:
        raise EpisodeStateError("end_episode() needs a running episode: call reset() first.")
    wrappers = _wrappers_innermost_first(env)
    # Pre-end phase: the base env's end releases the episode state (the DB env drops its
    # database), so hooks that still need to look at it (trap state checks) run before.
    for wrapper in wrappers:
        wrapper.before_episode_end()
    info = base.end_episode(reason, detail=detail)
    if limit is not None:
        info["limit"] = limit
    for wrapper in wrappers:
        info = wrapper.on_episode_end(info)
    return info


def end_episode_now(env: gym.Env[Any, Any], reason: FinishReason, detail: str, info: dict[str, Any]) -> bool:
    """End the running episode from a wrapper's ``step`` (a limit or policy wrapper), through
    :func:`end_episode` on the stack below the wrapper, so the wrappers inside it record the end too.

    Merges the end entries (``finish_reason``, ``score``, ``finish_detail`` and what the inner
    wrappers add) into ``info``.

    Args:
        env: the calling wrapper's ``self.env``.

    Returns:
        True if this call ended the episode, False if it had already ended (then ``info`` is
        left as it is: the first end wins).
    """
    base = agent_env(env)
    if base.finish_reason is not None or base.task is None:
        return False
    info.update(end_episode(env, reason, detail=detail))
    return True


def _wrappers_innermost_first(env: gym.Env[Any, Any]) -> list[EpisodeWrapper]:
    chain: list[EpisodeWrapper] = []
    current: gym.Env[Any, Any] = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, EpisodeWrapper):
            chain.append(current)
        current = current.env
    chain.reverse()
    return chain


__all__ = ["EpisodeWrapper", "end_episode", "end_episode_now", "reward_of"]
