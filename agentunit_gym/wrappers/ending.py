"""End an episode from outside ``step`` so that the wrapper stack still sees the end.

The base env's ``end_episode`` alone ends the episode but skips every wrapper's end-of-episode
work (trap verdicts, the context count, the trace). :func:`end_episode` ends it through the
stack instead: every :class:`~agentunit_gym.wrappers.base.EpisodeWrapper` in the stack gets
its two hooks called, innermost first, as ``step`` would hand the end info outwards
(``before_episode_end()`` while the episode state is still there, then
``on_episode_end(info)``). Other wrappers (gymnasium's own) are passed through. Every
ending goes through here: the runner's
(:func:`end_episode`), a limit or policy wrapper's inside its ``step``
(:func:`end_episode_now`, which ends the stack below that wrapper; the wrappers above see
the end in ``step``'s return), and an end the base env reaches in ``step`` (each wrapper's
``step`` calls its own ``on_episode_end`` on the final step).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.errors import EpisodeStateError
from agentunit_gym.wrappers.base import EpisodeWrapper
from agentunit_gym.wrappers.info import agent_env


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


__all__ = ["end_episode", "end_episode_now"]
