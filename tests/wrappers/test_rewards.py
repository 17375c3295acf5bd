"""Shaped rewards (issue 20): ShapeReward and the built-in reward functions, exact values."""

from __future__ import annotations

import json
import pickle
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.domains.db.scoring import answer_f1
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import ShapeReward, format_penalty, partial_credit, terminal_reward
from tests.core.toy import ToyEnv


def _end(components: dict[str, Any], *, reward: float = 0.0, success: bool = False,
         finish: FinishReason | str = FinishReason.COMPLETE) -> tuple[dict[str, Any], dict[str, Any]]:
    score = {"reward": reward, "success": success, "components": components, "detail": ""}
    return score, {"finish_reason": finish, "score": score, "action_error": {}}


def test_partial_credit_reads_each_domains_parts() -> None:
    assert partial_credit(*_end({"f1": 0.4, "precision": 0.5}, reward=0.4)) == 0.4  # KG
    assert partial_credit(*_end({"answer_f1": 0.4, "answer_match": False})) == 0.4  # DB question
    assert partial_credit(*_end({"method": "check", "checks_passed": 1.0, "checks_total": 4.0})) == 0.25  # OS
    # WebShop: 2 of 3 attributes, 1 of 1 option, price ok; w_price = 1 / (3 + 1 + 1); wrong product type.
    webshop = {"r_type": 0.0, "raw_reward": 0.0, "num_attr_matches": 2.0, "num_option_matches": 1.0,
               "r_price": True, "w_price": 0.2}
    assert partial_credit(*_end(webshop)) == pytest.approx(0.8, abs=1e-12)
    assert partial_credit(*_end({"hash_match": False})) == 0.0  # DB modification: no parts
    assert partial_credit(*_end({"f1": 0.4}, reward=1.0, success=True)) == 1.0


def test_partial_credit_needs_a_commit() -> None:
    assert partial_credit(*_end({"f1": 0.4}, finish=FinishReason.TASK_LIMIT)) == 0.0
    assert partial_credit(*_end({"method": "check", "checks_passed": 2.0, "checks_total": 2.0},
                                finish=FinishReason.INVALID_FORMAT)) == 0.0
    assert partial_credit({}, {"finish_reason": "", "score": {}, "action_error": {}}) == 0.0


def test_answer_f1() -> None:
    assert answer_f1(["a", "b"], ["a", "c", "d"]) == pytest.approx(0.4)  # P 1/2, R 1/3
    assert answer_f1(["3.0"], ["3"]) == 1.0
    assert answer_f1([], ["a"]) == 0.0
    assert answer_f1(["x"], ["a", "b"]) == 0.0


def test_format_penalty_on_the_toy_env() -> None:
    env = ShapeReward(ToyEnv(), format_penalty(0.25))
    env.reset(options={"task_id": "t1"})
    assert env.step("nonsense")[1] == -0.25
    assert env.step("Act: echo(hi)")[1] == 0.0
    _, reward, terminated, _, info = env.step("Act: answer(42)")
    assert (reward, terminated, info["score"]["reward"]) == (1.0, True, 1.0)
    with pytest.raises(ConfigError, match="penalty must be 0 or more"):
        format_penalty(-1.0)


def test_default_is_the_envs_own_reward() -> None:
    env = ShapeReward(ToyEnv())
    assert env.reward_fn is terminal_reward
    env.reset(options={"task_id": "t1"})
    assert env.step("Act: answer(41)")[1] == 0.0


def test_db_partial_answer_earns_its_f1() -> None:
    env = ShapeReward(gym.make("AgentUnit/DB-v0", backend="sqlite"), format_penalty(0.1, partial_credit))
    env.reset(options={"task_id": "db-antibiotics-06"})  # six gold values
    assert env.step("hello?")[1] == pytest.approx(-0.1)
    reply = "Action: Answer\nFinal Answer: " + json.dumps(["Bacillus anthracis", "Staphylococcus aureus"])
    _, reward, terminated, _, info = env.step(reply)
    # P = 2/2, R = 2/6: F1 = 2 * 1 * (1/3) / (1 + 1/3) = 0.5; the env's own reward stays 0.
    assert terminated and reward == pytest.approx(0.5) and info["score"]["reward"] == 0.0
    assert info["score"]["components"]["answer_f1"] == pytest.approx(0.5)
    env.close()


def test_shaped_rewards_in_a_vector_env_and_a_pickle() -> None:
    shaped = partial(ShapeReward, reward_fn=format_penalty(0.5))
    envs = gym.make_vec("AgentUnit/DB-v0", num_envs=3, vectorization_mode="sync", backend="sqlite",
                        wrappers=[shaped])
    envs.reset(seed=0)
    _, rewards, *_ = envs.step(("", "Action: Operation\n```sql\nSELECT 1;\n```", "y" * 1000))
    assert rewards.tolist() == [-0.5, 0.0, -0.5]
    envs.close()
    copy = pickle.loads(pickle.dumps(ShapeReward(ToyEnv(), format_penalty(0.5, partial_credit))))
    copy.reset(options={"task_id": "t2"})
    assert copy.step("?")[1] == -0.5 and np.isclose(copy.step("Act: answer(7)")[1], 1.0)
