"""Step and wall-clock limits per episode, ending in ``TASK_LIMIT`` (TLE)."""

from __future__ import annotations

import time
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.wrappers import TimeLimit

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.base import EpisodeWrapper, Layer, check_stack_order
from agentunit_gym.wrappers.info import agent_env, reset_info, skipped_step_info, step_info
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo


class LimitEpisode(TimeLimit[str, str], EpisodeWrapper):
    """End an episode with ``TASK_LIMIT`` after ``max_steps`` steps or ``max_seconds`` of wall clock.

    A gymnasium :class:`~gymnasium.wrappers.TimeLimit` that also tells the AgentUnit env why
    the episode ended, so ``info`` carries ``finish_reason`` TASK_LIMIT and the ``score`` of
    the unfinished episode, like every other end. The wall clock runs from ``reset`` and
    counts the agent's thinking time too: a step that arrives after the deadline is not
    executed, and a step that returns after it ends the episode. A running command is
    never interrupted by this wrapper (the backend's per-command timeout does that).

    The env's own turn limit still applies; to raise it, make the env with a larger
    ``max_steps`` too (``make_eval_env`` does both).

    Example:
        >>> import gymnasium as gym
        >>> env = LimitEpisode(gym.make("AgentUnit/DB-v0", backend="sqlite"), max_steps=2, max_seconds=120)
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> info["step_limit"], info["time_limit_s"]
        (2, 120)
        >>> for _ in range(2):
        ...     *_, truncated, info = env.step('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}')
        >>> truncated, info["finish_reason"].abbreviation, info["limit"]
        (True, 'TLE', <LimitKind.STEPS: 'steps'>)
        >>> env.close()

    Args:
        env: a stack over an AgentUnit env.
        max_steps: turn limit; None takes the domain's (AgentBench's) turn limit, the env's
            ``default_max_steps`` (the domain description's ``step_limit``).
        max_seconds: wall-clock limit per episode; None for none.

    Raises:
        ConfigError: a limit below 1 step or not above 0 seconds.
    """

    layer = Layer.LIMITS

    def __init__(self, env: gym.Env[str, str], max_steps: int | None = None, max_seconds: float | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, max_steps=max_steps, max_seconds=max_seconds)
        base = agent_env(env)
        if max_steps is None:
            max_steps = base.default_max_steps
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ConfigError(f"max_steps must be an integer of at least 1, got {max_steps!r}.")
        if max_seconds is not None and not max_seconds > 0:
            raise ConfigError(f"max_seconds must be above 0 (or None for no limit), got {max_seconds!r}.")
        super().__init__(env, max_episode_steps=max_steps)  # TimeLimit's, which skips EpisodeWrapper.__init__
        check_stack_order(self)
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self._deadline: float | None = None
        self._last_observation = ""

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, WrappedResetInfo]:
        observation, raw = super().reset(seed=seed, options=options)
        info = reset_info(raw)
        self._deadline = None if self.max_seconds is None else time.monotonic() + self.max_seconds
        self._last_observation = observation
        info["step_limit"] = self.max_steps
        info["time_limit_s"] = self.max_seconds
        return observation, info

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        late = self._deadline is not None and time.monotonic() >= self._deadline
        if late and self._elapsed_steps is not None and agent_env(self.env).finish_reason is None:
            return self._late_step()
        # TimeLimit's own step would also truncate an episode that the agent just completed on
        # its last turn; here a commit on the last turn stays a plain termination.
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        elapsed = (self._elapsed_steps or 0) + 1
        self._elapsed_steps = elapsed  # type: ignore[assignment]  # TimeLimit declares it None-typed
        if not terminated and not truncated:
            if elapsed >= self.max_steps:
                truncated = True
                reward = self._end(info, f"step limit {self.max_steps} reached", LimitKind.STEPS, reward)
            elif self._deadline is not None and time.monotonic() >= self._deadline:
                truncated = True
                reward = self._end(info, f"time limit {self.max_seconds:g} s reached", LimitKind.TIME, reward)
        self._last_observation = observation
        return observation, reward, terminated, truncated, info

    def _late_step(self) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        # The agent answered after the deadline: the reply is not run, the episode ends now.
        assert self._elapsed_steps is not None
        self._elapsed_steps += 1
        base = agent_env(self.env)
        task_id = base.task.id if base.task is not None else ""
        info = skipped_step_info(self._elapsed_steps, task_id, base.max_steps,
                                 "the reply arrived after the time limit and was not run",
                                 backend_limits_off=base.backend_limits_off)
        reward = self._end(info, f"time limit {self.max_seconds:g} s reached before the reply", LimitKind.TIME, 0.0)
        return self._last_observation, reward, False, True, info

    def _end(self, info: WrappedStepInfo, detail: str, kind: LimitKind, reward: SupportsFloat) -> SupportsFloat:
        ended = self.end_episode_here(FinishReason.TASK_LIMIT, detail, info, kind)
        return reward if ended is None else ended


class EndTruncatedEpisode(EpisodeWrapper, gym.utils.RecordConstructorArgs):
    """End the AgentUnit episode when a wrapper below truncated it without ending it.

    ``gym.make("AgentUnit/OS-v0", max_episode_steps=N)`` puts gymnasium's ``TimeLimit``
    over the env; ``TimeLimit`` only sets ``truncated`` and the env would never learn that the
    episode is over (no ``finish_reason``, no score). Every AgentUnit id is registered with
    this wrapper as an additional wrapper, outside ``TimeLimit``: on such a step it ends the
    episode through the stack as ``TASK_LIMIT`` (``info["limit"]`` is ``steps``), so the step
    returns the score and reward like the env's own turn limit. Otherwise it does nothing.

    Example:
        >>> import gymnasium as gym, agentunit_gym
        >>> env = gym.make("AgentUnit/DB-v0", backend="sqlite", max_episode_steps=3)
        >>> _ = env.reset(seed=0)
        >>> for _ in range(3):
        ...     obs, reward, terminated, truncated, info = env.step("Action: Operation\\n```sql\\nSELECT 1\\n```")
        >>> truncated, info["finish_reason"].abbreviation, info["limit"].value, info["score"]["reward"]
        (True, 'TLE', 'steps', 0.0)
        >>> env.close()
    """

    layer = Layer.END_TRUNCATED

    def __init__(self, env: gym.Env[str, str]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
        cap = _time_limit_below(env)
        if cap is not None:
            # The env states its limit in the prompt and info["max_steps"]: make it the TimeLimit's.
            agent_env(env).cap_steps(cap)

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        if truncated and not terminated and not info.get("finish_reason"):
            base = agent_env(self.env)
            if base.task is not None and base.finish_reason is None:
                detail = f"step limit {base.steps} reached (max_episode_steps)"
                ended = self.end_episode_here(FinishReason.TASK_LIMIT, detail, info, LimitKind.STEPS)
                if ended is not None:
                    reward = ended
        return observation, reward, terminated, truncated, info


def _time_limit_below(env: gym.Env[str, str]) -> int | None:
    """The ``max_episode_steps`` of the innermost gymnasium ``TimeLimit`` in the stack, if any."""
    found: int | None = None
    current: gym.Env[Any, Any] = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, TimeLimit) and not isinstance(current, LimitEpisode):
            # TimeLimit keeps N only in this attribute (its public spec deep-copies every make()
            # argument); gymnasium is pinned in requirements/, and tests/wrappers/test_vector_info.py
            # fails if a release renames it.
            found = int(current._max_episode_steps)
        current = current.env
    return found
