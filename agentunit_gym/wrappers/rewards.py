"""Shaped rewards, opt-in: a reward function of the step's score and ``info``, and built-ins.

The envs' own reward is AgentBench's: the domain score on the final step, 0 before (OS and
DB success 0/1, KG F1, WebShop's reward). :class:`ShapeReward` replaces it with
``reward_fn(info["score"], info)`` on every step, for training loops that want a denser or
softer signal. The built-ins:

- :func:`terminal_reward`: the env's own reward (the default; shaping nothing).
- :func:`partial_credit`: on a completed episode, the share of the task done, from the
  score's components; 0 for episodes that end without the agent committing.
- :func:`format_penalty`: another reward function minus a fixed penalty on every step whose
  reply was not a valid action (``info["action_error"]`` set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import ConfigError

RewardFn = Callable[[Mapping[str, Any], Mapping[str, Any]], float]
"""``reward_fn(score, info) -> reward``: ``score`` is ``info["score"]`` (``{}`` until the
episode's final step), ``info`` the step's :class:`~agentunit_gym.core.info.StepInfo`. It is
a plain module-level function (or a ``functools.partial`` of one) so envs that carry it
still pickle."""


def terminal_reward(score: Mapping[str, Any], info: Mapping[str, Any]) -> float:
    """The env's own reward: the score's ``reward`` on the final step, 0 before."""
    return float(score.get("reward", 0.0)) if score else 0.0


def partial_credit(score: Mapping[str, Any], info: Mapping[str, Any]) -> float:
    """The share of the task done, on an episode the agent completed (committed); 0 otherwise.

    From the score's components, the first that applies:

    - a success: 1.0;
    - KG: ``f1`` (the answer set's F1 against the gold set; the same as the env's reward);
    - DB question tasks: ``answer_f1`` (F1 of the given answer's values against the gold ones);
    - OS check tasks: ``checks_passed / checks_total`` (the check scripts that passed, in order);
    - WebShop: the parts of WebShop's reward without its product-type factor,
      ``(attributes matched + options matched + price ok) / (attributes + options + 1)``
      (credit for the right features on the wrong product type);
    - otherwise the score's ``reward`` (DB modification tasks, OS answer tasks: 0 or 1).

    An episode that ended without a commit (a limit, an invalid reply under the terminate
    policy) earns 0, as in AgentBench: the agent has to say it is done.
    """
    if not score or info.get("finish_reason") != FinishReason.COMPLETE:
        return 0.0
    if score.get("success"):
        return 1.0
    parts: Mapping[str, Any] = score.get("components") or {}
    for name in ("f1", "answer_f1"):
        if isinstance(parts.get(name), float):
            return _unit(parts[name])
    total = parts.get("checks_total")
    if isinstance(total, float) and total > 0:
        return _unit(float(parts.get("checks_passed", 0.0)) / total)
    if isinstance(parts.get("w_price"), float):
        return _unit(_webshop_parts(parts))
    return _unit(float(score.get("reward", 0.0)))


def format_penalty(penalty: float = 0.1, base: RewardFn = terminal_reward) -> RewardFn:
    """``base``'s reward minus ``penalty`` on every step whose reply was not a valid action.

    Example:
        >>> import gymnasium as gym, agentunit_gym
        >>> env = ShapeReward(gym.make("AgentUnit/DB-v0", backend="sqlite"), format_penalty(0.1, partial_credit))
        >>> _ = env.reset(seed=0)
        >>> env.step("no action here")[1]  # not a valid action: the penalty
        -0.1
        >>> env.close()

    Args:
        penalty: what an invalid reply costs (at least 0).
        base: the reward function the penalty is taken from.

    Raises:
        ConfigError: a negative penalty.
    """
    if not penalty >= 0:
        raise ConfigError(f"penalty must be 0 or more (it is subtracted), got {penalty!r}.")
    return _Penalised(float(penalty), base)


class _Penalised:
    """A picklable closure: ``base(score, info) - penalty`` on invalid replies."""

    def __init__(self, penalty: float, base: RewardFn) -> None:
        self.penalty = penalty
        self.base = base

    def __call__(self, score: Mapping[str, Any], info: Mapping[str, Any]) -> float:
        reward = self.base(score, info)
        return reward - self.penalty if info.get("action_error") else reward

    def __repr__(self) -> str:
        return f"format_penalty({self.penalty!r}, {getattr(self.base, '__name__', self.base)!r})"


class ShapeReward(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Replace the reward with ``reward_fn(info["score"], info)`` on every step.

    The env's own reward stays in ``info["score"]["reward"]`` on the final step, so metrics and
    the evaluator still see AgentBench's score. Put it over the env (or over ``gym.make_vec``'s
    copies with ``wrappers=[...]``).

    Example:
        >>> import functools, gymnasium as gym
        >>> envs = gym.make_vec("AgentUnit/DB-v0", num_envs=2, backend="sqlite",
        ...                     wrappers=[functools.partial(ShapeReward, reward_fn=partial_credit)])
        >>> _ = envs.reset(seed=0)
        >>> _, rewards, terminated, *_ = envs.step(["Action: Answer\\nFinal Answer: []"] * 2)
        >>> terminated.tolist(), rewards.dtype.kind
        ([True, True], 'f')
        >>> envs.close()

    Args:
        env: an AgentUnit env or a stack over one.
        reward_fn: ``(score, info) -> float``; the built-ins are :func:`terminal_reward`,
            :func:`partial_credit` and :func:`format_penalty`.

    Raises:
        ConfigError: ``reward_fn`` is not callable.
    """

    def __init__(self, env: gym.Env[str, str], reward_fn: RewardFn = terminal_reward) -> None:
        if not callable(reward_fn):
            raise ConfigError(f"reward_fn must be a function (score, info) -> float, got {reward_fn!r}.")
        gym.utils.RecordConstructorArgs.__init__(self, reward_fn=reward_fn)
        gym.Wrapper.__init__(self, env)
        self.reward_fn = reward_fn

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, _, terminated, truncated, info = self.env.step(action)
        score = info.get("score") or {}
        return observation, float(self.reward_fn(score, info)), terminated, truncated, info


def _unit(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def _webshop_parts(parts: Mapping[str, Any]) -> float:
    matched = float(parts.get("num_attr_matches", 0.0)) + float(parts.get("num_option_matches", 0.0))
    price = 1.0 if parts.get("r_price") is True else 0.0
    return (matched + price) * float(parts["w_price"])  # w_price = 1 / (attributes + options + 1)


__all__ = ["RewardFn", "ShapeReward", "format_penalty", "partial_credit", "terminal_reward"]
