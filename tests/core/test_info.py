"""The shape of ``info`` (core/info.py): every documented key on every reset and step, one type each."""

from __future__ import annotations

from typing import Any, get_type_hints

import gymnasium as gym
import pytest

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.info import (
    RESET_OPTION_KEYS,
    ResetInfo,
    StepInfo,
    StepTiming,
    stable_components,
)
from agentunit_gym.errors import ConfigError, ResetOptionError
from tests.core.toy import ToyEnv
from tests.domains.vectorkit import per_copy

STEP_KEYS = set(get_type_hints(StepInfo))
RESET_KEYS = set(get_type_hints(ResetInfo))


def _steps(env: ToyEnv) -> list[dict[str, Any]]:
    infos: list[dict[str, Any]] = []
    env.reset(options={"task_id": "t1"})
    infos += [env.step("nonsense")[4], env.step("Act: fly(x)")[4], env.step("Act: echo(fail)")[4],
              env.step("Act: echo(hi)")[4]]  # the fourth step hits the toy's limit of 4
    env.reset(options={"task_id": "t1"})
    infos.append(env.step("Act: answer(42)")[4])
    return infos


def test_every_key_on_every_step_with_one_type() -> None:
    infos = _steps(ToyEnv())
    for info in infos:
        assert set(info) == STEP_KEYS, sorted(set(info) ^ STEP_KEYS)
        assert isinstance(info["action"], dict) and isinstance(info["action_error"], dict)
        assert isinstance(info["score"], dict) and isinstance(info["execution"], dict)
        assert isinstance(info["finish_reason"], str) and isinstance(info["limit"], str)
        assert isinstance(info["thought"], str) and isinstance(info["finish_detail"], str)
        assert type(info["execution_error"]) is bool and type(info["step"]) is int
        assert isinstance(info["timing"], StepTiming) and info["task_id"] == "t1" and info["max_steps"] == 4
        # Exactly one of action / action_error says what the reply was.
        assert bool(info["action"]) != bool(info["action_error"])
    nonsense, unknown, failed, limit, commit = infos
    assert nonsense["finish_reason"] == "" and nonsense["action_error"]["issue"] == "no_call"
    assert isinstance(nonsense["action_error"]["hint"], str)
    assert unknown["action_error"]["tool"] == "fly" and unknown["score"] == {}
    assert failed["execution_error"] is True and failed["execution"] == {"length": 4}
    assert limit["finish_reason"] is FinishReason.TASK_LIMIT and limit["limit"] is LimitKind.STEPS
    assert limit["score"] == {"reward": 0.0, "success": False, "components": {}, "detail": "no answer"}
    assert commit["finish_reason"] is FinishReason.COMPLETE and commit["limit"] == ""
    assert commit["score"]["components"] == {"exact_match": True} and commit["finish_detail"] == ""


def test_reset_keys() -> None:
    _, info = ToyEnv().reset(options={"task_id": "t2"})
    assert set(info) == RESET_KEYS
    assert (info["step"], info["finish_reason"], info["task_id"]) == (0, "", "t2")


def test_stable_components() -> None:
    got = stable_components({"f1": 0, "ok": True, "hash": None, "name": "x", "n": 3, "other": (1, 2)})
    assert got == {"f1": 0.0, "ok": True, "name": "x", "n": 3.0, "other": "(1, 2)"}
    assert type(got["f1"]) is float and type(got["ok"]) is bool


def test_a_mixed_batch_keeps_each_copys_info() -> None:
    # The trainer's report: an invalid reply next to a valid one crashed (or corrupted) the batch.
    for order in (("nonsense", "Act: echo(hi)"), ("Act: echo(hi)", "nonsense")):
        envs = gym.vector.SyncVectorEnv([ToyEnv, ToyEnv])
        envs.reset(seed=0, options={"task_id": "t1"})
        *_, infos = envs.step(order)
        for i, reply in enumerate(order):
            single = ToyEnv()
            single.reset(options={"task_id": "t1"})
            want = single.step(reply)[4]
            assert per_copy(infos, i) == want
        envs.close()


def test_unknown_reset_options_are_refused() -> None:
    env = ToyEnv()
    with pytest.raises(ResetOptionError) as caught:
        env.reset(options={"taskid": "t1"})
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ConfigError)
    assert caught.value.unknown == ["taskid"] and caught.value.known == RESET_OPTION_KEYS
    assert "'taskid'" in str(caught.value) and "'task_id', 'task'" in str(caught.value)
    assert env.reset(options={"task_id": "t2"})[1]["task_id"] == "t2"


def test_cap_steps() -> None:
    env = ToyEnv()
    env.cap_steps(2)
    assert env.reset(options={"task_id": "t1"})[1]["max_steps"] == 2
    capped = ToyEnv(max_steps=1)
    capped.cap_steps(3)
    assert capped.max_steps == 1
    with pytest.raises(ConfigError, match="at least 1"):
        env.cap_steps(0)
