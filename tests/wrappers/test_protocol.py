"""The wrapper protocol (wrappers/base.py): the one stack order, refused when broken; the walk
of the end hooks; and the typed ``info`` (core/info.py, wrappers/keys.py) checked against what the stack emits."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_type_hints

import gymnasium as gym
import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import (
    ClassifyActions,
    DetectLoops,
    EpisodeWrapper,
    InjectTraps,
    LimitContext,
    LimitEpisode,
    RecordTrace,
    TrapLibrary,
    end_episode,
    make_eval_env,
)
from agentunit_gym.wrappers.base import EpisodeHooks, Layer
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo
from agentunit_gym.wrappers.limits import EndTruncatedEpisode

from ..core.toy import ToyEnv
from ..infokit import mismatches
from .fakes import TOY_ADMIN_ID, register_toys
from .test_traps import TOY_LIBRARY

# ------------------------------------------------------------------------- order

STANDARD = [ClassifyActions, InjectTraps, DetectLoops, LimitEpisode, LimitContext, RecordTrace]
"""The standard stack, innermost first, as docs/wrappers.md's table gives it."""


def test_the_order_is_declared_once_and_matches_the_documented_stack() -> None:
    assert [w.layer for w in STANDARD] == [Layer.CLASSIFY, Layer.TRAPS, Layer.LOOPS, Layer.LIMITS,
                                          Layer.CONTEXT, Layer.TRACE]
    assert sorted(Layer) == [EndTruncatedEpisode.layer, *(w.layer for w in STANDARD)]
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", max_context_tokens=10_000)  # gym.make adds layer 0
    try:
        layers = []
        current: Any = env
        while isinstance(current, gym.Wrapper):
            if isinstance(current, EpisodeWrapper):
                layers.append(current.layer)
            current = current.env
        assert layers == sorted(Layer, reverse=True)  # outermost first: every layer, in order
    finally:
        env.close()


@pytest.mark.parametrize(("inner", "outer"), [
    (RecordTrace, ClassifyActions),
    (LimitContext, LimitEpisode),  # LimitEpisode's __init__ is TimeLimit's: checked all the same
    (DetectLoops, InjectTraps),
    (LimitEpisode, DetectLoops),
])
def test_a_wrapper_inside_one_that_belongs_further_out_is_refused(inner: type[Any], outer: type[Any]) -> None:
    kwargs = {LimitContext: {"max_tokens": 1000}, InjectTraps: {"library": TrapLibrary.model_validate(TOY_LIBRARY)}}
    below = inner(ToyEnv(), **kwargs.get(inner, {}))
    with pytest.raises(ConfigError, match=f"{outer.__name__} cannot wrap {inner.__name__}") as refused:
        outer(below, **kwargs.get(outer, {}))
    assert "classify < traps < loops < limits < context < trace" in str(refused.value)
    below.close()


def test_the_refusal_sees_through_wrappers_outside_the_order() -> None:
    class Plain(EpisodeWrapper):  # no layer: may sit anywhere
        pass

    inner = Plain(gym.wrappers.PassiveEnvChecker(RecordTrace(Plain(ToyEnv()))))
    with pytest.raises(ConfigError, match="ClassifyActions cannot wrap RecordTrace"):
        ClassifyActions(inner)
    ok = RecordTrace(Plain(LimitEpisode(Plain(ClassifyActions(ToyEnv())))))
    ok.close()


# -------------------------------------------------------------------------- walk


class _Recorder(EpisodeWrapper):
    def __init__(self, env: gym.Env[str, str], name: str, log: list[str]) -> None:
        EpisodeWrapper.__init__(self, env)
        self.name, self.log = name, log

    def before_episode_end(self) -> None:
        base = self.env.unwrapped
        self.log.append(f"before {self.name} (running: {base.finish_reason is None})")  # type: ignore[attr-defined]

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        self.log.append(f"on {self.name} ({info['finish_reason'].abbreviation})")  # type: ignore[union-attr]
        return info


class _EndHere(EpisodeWrapper):
    """Ends the episode from its own step, as a limit wrapper does."""

    def step(self, action: str) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        ended = self.end_episode_here(FinishReason.TASK_LIMIT, "ended here", info)
        return observation, ended if ended is not None else reward, terminated, True, info


def test_end_episode_walks_every_hook_innermost_first_around_the_base_end() -> None:
    log: list[str] = []
    env = _Recorder(_Recorder(gym.wrappers.OrderEnforcing(_Recorder(ToyEnv(), "a", log)), "b", log), "c", log)
    assert all(isinstance(w, EpisodeHooks) for w in (env, env.env))
    env.reset(options={"task_id": "t1"})
    info = end_episode(env, FinishReason.TASK_LIMIT, detail="outside")
    assert log == ["before a (running: True)", "before b (running: True)", "before c (running: True)",
                   "on a (TLE)", "on b (TLE)", "on c (TLE)"]
    # The end info has a step's shape: every key, the action keys empty.
    assert info["action"] == {} and info["finish_detail"] == "outside" and info["score"]["reward"] == 0.0
    env.close()


def test_an_end_inside_step_walks_only_the_wrappers_below() -> None:
    log: list[str] = []
    env = _Recorder(_EndHere(_Recorder(ToyEnv(), "inner", log)), "outer", log)
    env.reset(options={"task_id": "t1"})
    _, _, _, truncated, info = env.step("Act: echo(hi)")
    assert truncated and info["finish_reason"] is FinishReason.TASK_LIMIT and info["finish_detail"] == "ended here"
    assert info["execution"] == {"length": 2}  # the step's own keys survive the end
    assert log == ["before inner (running: True)", "on inner (TLE)"]  # outer sees it in step's return
    env.close()


# -------------------------------------------------------------------------- info


def test_the_checker_catches_a_wrong_value() -> None:
    # Guards the checker itself: a str where a bool belongs, and an unknown key, are caught.
    assert mismatches({"reward": 1.0, "success": "yes", "components": {}, "detail": ""},
                    get_type_hints(WrappedStepInfo)["score"].__args__[0]) == ["success='yes' is not <class 'bool'>"]
    assert any("undeclared" in p for p in mismatches({"nope": 1}, WrappedResetInfo))


def test_the_standard_stack_emits_exactly_the_declared_info(tmp_path: Path) -> None:
    register_toys()
    env = make_eval_env(TOY_ADMIN_ID, traps=TrapLibrary.model_validate(TOY_LIBRARY), trap_rate=1.0, trap_seed=1,
                        max_context_tokens=10_000, trace_dir=tmp_path, max_steps=6, max_seconds=60)
    try:
        seen: set[str] = set()
        for replies in (["nonsense", "Act: fly(x)", "Act: echo(fail)", "Act: echo(a)", "Act: echo(a)", "Act: echo(a)"],
                        ["Act: echo(rm x)", "Act: answer(42)"]):
            _, reset = env.reset(options={"task_id": "t1"})
            assert mismatches(reset, WrappedResetInfo) == []
            for reply in replies:
                *_, terminated, truncated, info = env.step(reply)
                assert mismatches(info, WrappedStepInfo) == [], reply
                seen |= set(info)
                if terminated or truncated:
                    break
        env.reset(options={"task_id": "t1"})
        env.step("Act: echo(b)")
        ended = end_episode(env, FinishReason.TASK_LIMIT, detail="outside")
        assert mismatches(ended, WrappedStepInfo) == []
        seen |= set(ended)
    finally:
        env.close()
    tiny = make_eval_env(TOY_ADMIN_ID, max_context_tokens=5)  # the prompt alone overflows: the reply is skipped
    try:
        tiny.reset(options={"task_id": "t1"})
        *_, truncated, info = tiny.step("Act: echo(a)")
        assert truncated and info["reply_class"] == "skipped" and mismatches(info, WrappedStepInfo) == []
        seen |= set(info)
    finally:
        tiny.close()
    assert set(get_type_hints(WrappedStepInfo)) == seen  # every declared key came up
