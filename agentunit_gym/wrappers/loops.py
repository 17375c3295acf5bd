"""Detect an agent stuck in a loop: the same action over and over, or a short cycle (A-B-A-B)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Literal, SupportsFloat

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.base import EpisodeWrapper, Layer
from agentunit_gym.wrappers.info import add_flags, agent_env, normalise, reset_info, step_info
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo

LoopAction = Literal["flag", "end"]


def action_key(action: str, info: Mapping[str, Any]) -> str:
    """The normalised identity of a step's action.

    A parsed action is its tool and arguments (so ``Act: bash`` with the same command but
    different reasoning text is the same action); an invalid reply is its whole text, with
    whitespace and case folded.
    """
    parsed = info.get("action")
    if isinstance(parsed, dict) and parsed.get("tool"):
        arguments = parsed.get("arguments") or {}
        items = sorted((str(k), normalise(str(v))) for k, v in arguments.items()) if isinstance(arguments, dict) else []
        return f"{parsed['tool']}:{items!r}"
    return "reply:" + normalise(str(action))


def find_loop(keys: list[str], repeats: int, max_cycle: int, cycle_repeats: int) -> str | None:
    """Describe the loop the most recent ``keys`` end in, or None.

    A loop is the same key ``repeats`` times in a row, or a cycle of 2..``max_cycle``
    distinct keys repeated ``cycle_repeats`` times in a row (A-B-A-B is a cycle of 2 twice).
    """
    if len(keys) >= repeats and len(set(keys[-repeats:])) == 1:
        return f"the same action {repeats} times in a row"
    for period in range(2, max_cycle + 1):
        span = period * cycle_repeats
        if len(keys) < span:
            break
        tail = keys[-span:]
        cycle = tail[:period]
        if len(set(cycle)) < 2:
            continue  # a run of one action is the repeat rule's business
        if all(tail[i] == cycle[i % period] for i in range(span)):
            return f"a cycle of {period} actions repeated {cycle_repeats} times"
    return None


class DetectLoops(EpisodeWrapper, gym.utils.RecordConstructorArgs):
    """Flag LOOP when the agent repeats itself, and optionally end the episode as TLE.

    ``info["loop"]`` describes the loop on the step that closes it (``""`` otherwise) and the
    step's flags get LOOP. With ``on_loop="end"`` the episode ends there with
    ``TASK_LIMIT`` (``truncated=True``), as AgentBench counts a repeating agent.

    Example:
        >>> import gymnasium as gym, agentunit_gym
        >>> env = DetectLoops(gym.make("AgentUnit/DB-v0", backend="sqlite"), repeats=3, on_loop="end")
        >>> _ = env.reset(seed=0)
        >>> for _ in range(3):
        ...     obs, reward, terminated, truncated, info = env.step("Action: Operation\\n```sql\\nSELECT 1\\n```")
        >>> truncated, info["finish_reason"].abbreviation, info["loop"], info["limit"].value
        (True, 'TLE', 'the same action 3 times in a row', 'loop')
        >>> env.close()

    Args:
        env: a stack over an AgentUnit env.
        repeats: how many identical actions in a row make a loop (at least 2).
        max_cycle: the longest cycle looked for (0 or 1: no cycle detection).
        cycle_repeats: how many times a cycle must repeat (at least 2).
        on_loop: ``"flag"`` or ``"end"``.

    Raises:
        ConfigError: out-of-range options.
    """

    layer = Layer.LOOPS

    def __init__(self, env: gym.Env[str, str], repeats: int = 3, max_cycle: int = 3, cycle_repeats: int = 2,
                 on_loop: LoopAction = "flag") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, repeats=repeats, max_cycle=max_cycle,
                                                 cycle_repeats=cycle_repeats, on_loop=on_loop)
        EpisodeWrapper.__init__(self, env)
        agent_env(env)
        if repeats < 2:
            raise ConfigError(f"repeats must be at least 2, got {repeats!r}.")
        if cycle_repeats < 2:
            raise ConfigError(f"cycle_repeats must be at least 2, got {cycle_repeats!r}.")
        if max_cycle < 0:
            raise ConfigError(f"max_cycle must be 0 or more, got {max_cycle!r}.")
        if on_loop not in ("flag", "end"):
            raise ConfigError(f"on_loop must be 'flag' or 'end', got {on_loop!r}.")
        self.repeats = repeats
        self.max_cycle = max_cycle
        self.cycle_repeats = cycle_repeats
        self.on_loop = on_loop
        self._keys: deque[str] = deque(maxlen=max(repeats, max_cycle * cycle_repeats))
        self._loops = 0

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, WrappedResetInfo]:
        observation, info = self.env.reset(seed=seed, options=options)  # a refused reset changes nothing here
        self._keys.clear()
        self._loops = 0
        return observation, reset_info(info)

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        self._keys.append(action_key(action, info))
        loop = find_loop(list(self._keys), self.repeats, self.max_cycle, self.cycle_repeats)
        info["loop"] = loop or ""
        if loop is not None:
            self._loops += 1
            add_flags(info, Flag.LOOP)
            if self.on_loop == "end" and not (terminated or truncated):
                ended = self.end_episode_here(FinishReason.TASK_LIMIT, f"loop detected: {loop}", info, LimitKind.LOOP)
                if ended is not None:
                    truncated, reward = True, ended
        info["loop_count"] = self._loops
        return observation, reward, terminated, truncated, info

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Record the episode's loop count in the end ``info`` (for
        :func:`~agentunit_gym.wrappers.ending.end_episode`; ``step`` records it every step)."""
        info["loop_count"] = self._loops
        return info
