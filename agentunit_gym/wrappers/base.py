"""The wrapper protocol: the hooks every AgentUnit wrapper has, the one order of the stack, and
how an episode's end walks the stack.

**The hooks.** An episode can end in the base env's ``step`` (a commit, an invalid reply under
the terminate policy, the env's turn limit), in a wrapper's ``step`` (a limit, a loop, the
context), or from outside ``step`` (the evaluator's wall clock, a model's context refusal,
through :func:`end_episode`). Every wrapper sees each end through the same two hooks of
:class:`EpisodeHooks`:

- :meth:`~EpisodeHooks.before_episode_end`: the episode's state still exists (the DB env has
  not dropped its database), e.g. to judge a planted trap;
- :meth:`~EpisodeHooks.on_episode_end`: add this wrapper's entries to the end ``info``.

**The walk.** :func:`end_episode` (and :func:`end_episode_now`, its form inside a wrapper's
``step``) calls every :class:`EpisodeWrapper` of the stack below its starting point, innermost
first: each one's ``before_episode_end()``, then the base env's ``end_episode``, then each
one's ``on_episode_end(info)`` on the same ``info``; wrappers that are not EpisodeWrappers
(gymnasium's own) are passed through. Wrappers above a :func:`end_episode_now` see the end in
``step``'s return, and call their own ``on_episode_end`` there. The first end wins: an
episode that has ended is not ended again.

**The order.** :class:`Layer` is the one declaration of the stack's order, innermost first.
Each wrapper of the standard stack names its layer (:attr:`EpisodeWrapper.layer`); a wrapper
put inside one of a higher layer is refused with a :class:`~agentunit_gym.errors.ConfigError`
when it is made (:func:`check_stack_order`). Layers may be left out; a wrapper without a layer
(``layer = None``, the default for your own) may sit anywhere.

**The info.** The hooks receive and return a
:class:`~agentunit_gym.wrappers.keys.WrappedStepInfo`: the base env's keys, always, and the keys of
the wrappers in the stack (docs/wrappers.md lists them).

Example (a wrapper of your own that ends episodes after three steps):

    >>> import gymnasium as gym
    >>> class CountSteps(EpisodeWrapper):
    ...     def reset(self, *, seed=None, options=None):
    ...         self.count = 0
    ...         return self.env.reset(seed=seed, options=options)
    ...
    ...     def step(self, action):
    ...         self.count += 1
    ...         observation, reward, terminated, truncated, info = self.env.step(action)
    ...         if self.count >= 3 and not (terminated or truncated):
    ...             ended = self.end_episode_here(FinishReason.TASK_LIMIT, "three steps", info, LimitKind.STEPS)
    ...             if ended is not None:
    ...                 reward, truncated = ended, True
    ...         return observation, reward, terminated, truncated, info
    >>> env = CountSteps(gym.make("AgentUnit/DB-v0", backend="sqlite"))
    >>> _ = env.reset(options={"task_id": "db-weather-03"})
    >>> for _ in range(3):
    ...     _, reward, _, truncated, info = env.step('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}')
    >>> truncated, reward, info["finish_reason"].abbreviation, info["finish_detail"], info["step"]
    (True, 0.0, 'TLE', 'three steps', 3)
    >>> env.close()
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.info import merge_end, running_step_info
from agentunit_gym.errors import ConfigError, EpisodeStateError
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.keys import WrappedStepInfo


class Layer(IntEnum):
    """Where a wrapper sits in a stack, innermost (0) first: the one declaration of the order
    :func:`~agentunit_gym.wrappers.stack.make_eval_env` builds and :func:`check_stack_order`
    enforces."""

    END_TRUNCATED = 0
    """``EndTruncatedEpisode``: ``gym.make`` puts it on the env, so a ``max_episode_steps``
    truncation ends the episode before any wrapper reads the step."""
    CLASSIFY = 1
    """``ClassifyActions``: classifies the env's own verdict on the reply, before anything else
    can end the episode."""
    TRAPS = 2
    """``InjectTraps``: its text must be inside what the context limit counts and the trace records."""
    LOOPS = 3
    """``DetectLoops``: sees every executed action."""
    LIMITS = 4
    """``LimitEpisode``: step and wall-clock limits (TLE)."""
    CONTEXT = 5
    """``LimitContext``: counts what the agent reads, trap text and hints included (CLE)."""
    TRACE = 6
    """``RecordTrace``: outermost, records exactly what the agent saw and did."""


@runtime_checkable
class EpisodeHooks(Protocol):
    """The two hooks through which a wrapper takes part in every episode end (see the module
    docstring for when each runs)."""

    def before_episode_end(self) -> None:
        """Runs before the base env ends an episode from outside ``step``, while the episode's
        state still exists (innermost wrapper first)."""

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Adds this wrapper's entries to the end ``info`` and returns it; runs once per episode."""


class EpisodeWrapper(gym.Wrapper[str, str, str, str]):
    """A wrapper over an AgentUnit env that takes part in every episode end (:class:`EpisodeHooks`).

    Subclasses override the hooks they need (the defaults do nothing), set :attr:`layer` when
    they belong to the standard stack, and call ``EpisodeWrapper.__init__(self, env)`` (or
    :func:`check_stack_order` after another base's ``__init__``).
    """

    layer: ClassVar[Layer | None] = None
    """This wrapper's place in the stack's order; None: anywhere."""

    def __init__(self, env: gym.Env[str, str]) -> None:
        gym.Wrapper.__init__(self, env)
        check_stack_order(self)

    def before_episode_end(self) -> None:
        """Called before the base env ends an episode from outside ``step`` (innermost wrapper
        first), while the episode's state still exists."""

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Add this wrapper's entries to the end ``info`` and return it. Called once per episode:
        by :func:`end_episode` (innermost first), or by the wrapper's own ``step`` on the final
        step when the end came from below."""
        return info

    def end_episode_here(
        self, reason: FinishReason, detail: str, info: WrappedStepInfo | dict[str, Any],
        limit: LimitKind | None = None,
    ) -> float | None:
        """End the running episode from this wrapper's ``step``, through the stack below it.

        The wrappers inside this one record the end (their hooks run on ``info``); the end
        entries (``finish_reason``, ``score``, ``finish_detail`` ...) and ``limit`` are set in ``info``.

        Args:
            reason: the finish reason.
            detail: why, for the trace's ``finish_detail``.
            info: this step's ``info``, updated in place.
            limit: which limit, for ``TASK_LIMIT`` ends.

        Returns:
            The episode's reward (its score's) when this call ended it; None when the episode
            had already ended (the first end wins and ``info`` is left as it is).
        """
        typed = cast(WrappedStepInfo, info)
        if not end_episode_now(self.env, reason, detail, typed):
            return None
        if limit is not None:
            typed["limit"] = limit
        return reward_of(typed)


def check_stack_order(wrapper: gym.Wrapper[Any, Any, Any, Any]) -> None:
    """Refuse ``wrapper`` when a wrapper below it belongs further out (:class:`Layer`).

    Raises:
        ConfigError: naming both wrappers and the order.
    """
    layer = getattr(wrapper, "layer", None)
    if layer is None:
        return
    current: gym.Env[Any, Any] = wrapper.env
    while isinstance(current, gym.Wrapper):
        below = getattr(current, "layer", None) if isinstance(current, EpisodeWrapper) else None
        if below is not None and below > layer:
            order = " < ".join(f"{item.name.lower()}" for item in Layer)
            raise ConfigError(
                f"{type(wrapper).__name__} cannot wrap {type(current).__name__}: the stack's order, innermost "
                f"first, is {order} (wrappers.base.Layer). Wrap {type(current).__name__} around "
                f"{type(wrapper).__name__} instead, or build the stack with make_eval_env().")
        current = current.env


def reward_of(info: WrappedStepInfo | dict[str, Any], default: float = 0.0) -> float:
    """The reward an end ``info`` carries (its score's), else ``default``."""
    score = info.get("score")
    if isinstance(score, dict) and "reward" in score:
        return float(score["reward"])
    return default


def end_episode(env: gym.Env[Any, Any], reason: FinishReason, *, detail: str = "",
                limit: LimitKind | None = None) -> WrappedStepInfo:
    """End the running episode of ``env`` for ``reason``, and let every wrapper record the end.

    Use this, not ``env.unwrapped.end_episode``, when something outside ``step`` ends an
    episode (a runner's wall-clock limit, a model's context-window refusal): the trap
    verdict, the context count and the trace then come out as for an episode ended in a step.

    Example (``trace_dir=`` would also write the trace to a file):
        >>> import agentunit_gym
        >>> env = agentunit_gym.make_eval_env("AgentUnit/DB-v0", backend="sqlite")
        >>> _ = env.reset(seed=0)
        >>> info = end_episode(env, FinishReason.TASK_LIMIT, detail="wall-clock limit reached")
        >>> info["finish_reason"].abbreviation, info["trace"].finish_detail, info["invalid_count"]
        ('TLE', 'wall-clock limit reached', 0)
        >>> env.close()

    Args:
        env: a wrapper stack over an AgentUnit env (or the env itself).
        reason: the finish reason (not ``COMPLETE``, which only a committing action reaches).
        detail: why, recorded as the trace's ``finish_detail``.
        limit: which limit ended a ``TASK_LIMIT`` episode (``info["limit"]``), None for none.

    Returns:
        The end info, with every key of a step's (:class:`~agentunit_gym.core.info.StepInfo`;
        no action ran, so ``action``, ``execution`` ... are empty): ``finish_reason``, ``score``
        and ``finish_detail`` from the base env, plus what the wrappers add (``trap``,
        ``context_tokens``, ``trace`` ...).

    Raises:
        EpisodeStateError: no episode is running (never started, or already ended).
        ConfigError: ``reason`` is ``COMPLETE``, or the stack does not end in an AgentUnit env.
    """
    base = agent_env(env)
    if base.task is None or base.finish_reason is not None:
        raise EpisodeStateError("end_episode() needs a running episode: call reset() first.")
    info = cast(WrappedStepInfo, running_step_info(base.steps, base.task.id, base.max_steps,
                                                   backend_limits_off=base.backend_limits_off))
    return _end_through(env, reason, detail, limit, info)


def end_episode_now(env: gym.Env[Any, Any], reason: FinishReason, detail: str,
                    info: WrappedStepInfo | dict[str, Any]) -> bool:
    """End the running episode from a wrapper's ``step`` (a limit or policy wrapper), through
    the stack below the wrapper, so the wrappers inside it record the end too.

    The end entries (``finish_reason``, ``score``, ``finish_detail``) and what the inner
    wrappers add are set in ``info``, this step's.

    Args:
        env: the calling wrapper's ``self.env``.

    Returns:
        True if this call ended the episode, False if it had already ended (then ``info`` is
        left as it is: the first end wins).
    """
    base = agent_env(env)
    if base.finish_reason is not None or base.task is None:
        return False
    typed = cast(WrappedStepInfo, info)
    ended = _end_through(env, reason, detail, None, typed)
    if ended is not typed:
        typed.update(ended)  # a hook that returned a new dict instead of adding to this one
    return True


def _end_through(env: gym.Env[Any, Any], reason: FinishReason, detail: str, limit: LimitKind | None,
                 info: WrappedStepInfo) -> WrappedStepInfo:
    """The walk: every hook of the stack below ``env``, innermost first, around the base env's end."""
    base = agent_env(env)
    wrappers = _wrappers_innermost_first(env)
    # Pre-end phase: the base env's end releases the episode state (the DB env drops its
    # database), so hooks that still need to look at it (trap state checks) run before.
    for wrapper in wrappers:
        wrapper.before_episode_end()
    merge_end(info, base.end_episode(reason, detail=detail))
    if limit is not None:
        info["limit"] = limit
    for wrapper in wrappers:
        info = wrapper.on_episode_end(info)
    return info


def _wrappers_innermost_first(env: gym.Env[Any, Any]) -> list[EpisodeWrapper]:
    chain: list[EpisodeWrapper] = []
    current: gym.Env[Any, Any] = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, EpisodeWrapper):
            chain.append(current)
        current = current.env
    chain.reverse()
    return chain


__all__ = [
    "EpisodeHooks",
    "EpisodeWrapper",
    "Layer",
    "check_stack_order",
    "end_episode",
    "end_episode_now",
    "reward_of",
]
