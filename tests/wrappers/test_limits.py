from __future__ import annotations

import time

import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.registry import domains
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import LimitEpisode

from ..core.toy import ToyEnv


def test_agentbench_defaults_per_domain() -> None:
    # One definition: the domain description's step limit is the env's default and the wrapper's.
    limits = {d.name: d.step_limit for d in domains()}
    assert {k: limits[k] for k in ("os", "db")} == {"os": 8, "db": 15}
    for d in domains():
        from agentunit_gym.core.domain import import_object

        env_class = import_object(d.envs[0].entry_point)
        assert env_class.DOMAIN is d  # the env reads its step limit (and name, task model) from it
    # ToyEnv is not a registered domain: its own description's limit (4) is taken.
    assert LimitEpisode(ToyEnv()).max_steps == 4


def test_step_limit_ends_with_task_limit_and_score() -> None:
    env = LimitEpisode(ToyEnv(max_steps=10), max_steps=2)
    _, info = env.reset(options={"task_id": "t1"})
    assert info["step_limit"] == 2
    _, _, term, trunc, info = env.step("Act: echo(a)")
    assert (term, trunc, info["finish_reason"]) == (False, False, "")
    obs, reward, term, trunc, info = env.step("Act: echo(b)")
    assert obs == "b" and reward == 0.0 and (term, trunc) == (False, True)
    assert info["finish_reason"] is FinishReason.TASK_LIMIT
    assert info["finish_detail"] == "step limit 2 reached" and info["limit"] == "steps"
    assert info["score"]["success"] is False
    assert env.unwrapped.finish_reason is FinishReason.TASK_LIMIT


def test_commit_on_the_last_turn_is_not_truncated() -> None:
    env = LimitEpisode(ToyEnv(max_steps=10), max_steps=2)
    env.reset(options={"task_id": "t1"})
    env.step("Act: echo(a)")
    _, reward, term, trunc, info = env.step("Act: answer(42)")
    assert (reward, term, trunc) == (1.0, True, False)
    assert info["finish_reason"] is FinishReason.COMPLETE


def test_env_limit_lower_than_wrapper_wins() -> None:
    env = LimitEpisode(ToyEnv(max_steps=1), max_steps=5)
    env.reset(options={"task_id": "t1"})
    _, _, term, trunc, info = env.step("Act: echo(a)")
    assert trunc and not term and info["finish_detail"] == "step limit 1 reached"
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and env.unwrapped.steps == 1


def test_wall_clock_limit_after_a_step(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("agentunit_gym.wrappers.limits.time.monotonic", lambda: clock[0])
    env = LimitEpisode(ToyEnv(), max_steps=4, max_seconds=5.0)
    env.reset(options={"task_id": "t1"})
    clock[0] += 2.0
    _, _, _, trunc, info = env.step("Act: echo(a)")
    assert not trunc and info["finish_reason"] == ""
    clock[0] += 3.5  # the agent thought for 3.5 s: the reply arrives after the deadline
    obs, reward, term, trunc, info = env.step("Act: answer(42)")
    assert (term, trunc, reward) == (False, True, 0.0)
    assert obs == "a"  # the last observation again: the reply was not run
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and info["limit"] == "time"
    assert info["reply_class"] == "skipped" and info["score"]["success"] is False
    assert env.unwrapped.steps == 1  # the env never saw the late reply


def test_wall_clock_limit_passing_during_a_step() -> None:
    env = LimitEpisode(ToyEnv(), max_steps=4, max_seconds=0.05)
    env.reset(options={"task_id": "t1"})
    original = env.unwrapped._execute

    def slow(action):  # type: ignore[no-untyped-def]
        time.sleep(0.08)
        return original(action)

    env.unwrapped._execute = slow  # type: ignore[method-assign]
    obs, reward, term, trunc, info = env.step("Act: echo(a)")
    assert (term, trunc) == (False, True) and info["limit"] == "time"
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and (obs, reward) == ("a", 0.0)  # the step did run


@pytest.mark.parametrize("kwargs", [{"max_steps": 0}, {"max_steps": 2.5}, {"max_seconds": 0}, {"max_seconds": -1}])
def test_bad_limits_are_config_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):  # the message names the option
        LimitEpisode(ToyEnv(), **kwargs)  # type: ignore[arg-type]


class _ToyWithLimitsOff(ToyEnv):
    """A backend that cannot enforce its memory limit here (as a local sandbox without a cgroup)."""

    @property
    def backend_limits_off(self) -> str:
        return "memory: no cgroup here (test)"


def test_steps_a_wrapper_answers_carry_the_envs_backend_limits_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # One value on every reset and step, also on the steps no action ran in: a late reply
    # (LimitEpisode), a prompt over the context (LimitContext), end_episode().
    from agentunit_gym.wrappers import LimitContext, end_episode

    off = "memory: no cgroup here (test)"
    clock = [1000.0]
    monkeypatch.setattr("agentunit_gym.wrappers.limits.time.monotonic", lambda: clock[0])
    env = LimitEpisode(_ToyWithLimitsOff(), max_steps=4, max_seconds=5.0)
    _, info = env.reset(options={"task_id": "t1"})
    assert info["backend_limits_off"] == off
    _, _, _, _, info = env.step("Act: echo(a)")
    assert info["backend_limits_off"] == off
    clock[0] += 10.0
    _, _, _, trunc, info = env.step("Act: echo(b)")
    assert trunc and info["reply_class"] == "skipped" and info["backend_limits_off"] == off

    overflow = LimitContext(_ToyWithLimitsOff(), max_tokens=5)
    overflow.reset(options={"task_id": "t1"})
    _, _, _, trunc, info = overflow.step("Act: answer(42)")
    assert trunc and info["reply_class"] == "skipped" and info["backend_limits_off"] == off

    ended = _ToyWithLimitsOff()
    ended.reset(options={"task_id": "t1"})
    assert end_episode(ended, FinishReason.TASK_LIMIT, detail="test")["backend_limits_off"] == off
