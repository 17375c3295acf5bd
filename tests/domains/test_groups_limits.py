"""Groups of copies on one task (GRPO), gym.make's max_episode_steps, reset options (issue 20)."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.errors import LostResetOptionsError, ResetOptionError

DB = partial(gym.make, "AgentUnit/DB-v0", backend="sqlite")
SELECT = "Action: Operation\n```sql\nSELECT 1;\n```"


def _task_ids(count: int) -> list[str]:
    env = DB()
    ids = [t.id for t in env.unwrapped.tasks[:count]]
    env.close()
    return ids


def test_max_episode_steps_is_the_turn_limit_in_prompt_info_and_end() -> None:
    env = gym.make("AgentUnit/KG-v0", backend="embedded", max_episode_steps=3)
    prompt, info = env.reset(seed=0)
    assert info["max_steps"] == 3 and "at most 3 actions" in prompt
    for step in (1, 2, 3):
        _, _, terminated, truncated, info = env.step("Action: get_relations(nowhere)")
        assert info["max_steps"] == 3 and (terminated, truncated) == (False, step == 3)
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and info["limit"] is LimitKind.STEPS
    assert info["finish_detail"] == "step limit 3 reached" and info["score"]["reward"] == 0.0
    env.close()


def test_max_episode_steps_above_the_domains_limit_raises_it() -> None:
    env = gym.make("AgentUnit/DB-v0", backend="sqlite", max_episode_steps=20)  # AgentBench's DB limit: 15
    assert env.reset(seed=0)[1]["max_steps"] == 20
    for _ in range(15):
        *_, terminated, truncated, info = env.step(SELECT)
    assert not (terminated or truncated) and info["step"] == 15
    env.close()
    # max_steps= given to the env too: the lower of the two.
    both = gym.make("AgentUnit/DB-v0", backend="sqlite", max_steps=2, max_episode_steps=5)
    assert both.reset(seed=0)[1]["max_steps"] == 2
    both.close()


def test_unknown_reset_options_raise_naming_the_known_keys() -> None:
    env = DB()
    with pytest.raises(ResetOptionError, match=r"unknown key\(s\) 'taskid'.*'task_id', 'task'") as caught:
        env.reset(options={"taskid": "db-x"})
    assert isinstance(caught.value, ValueError)
    env.close()
    envs = gym.vector.SyncVectorEnv([DB, DB])
    with pytest.raises(ResetOptionError):
        envs.reset(options={"seed": 3})
    envs.close()


def test_a_group_runs_one_task_and_reports_it_per_copy() -> None:
    first, second = _task_ids(2)
    group = 4
    envs = gym.make_vec("AgentUnit/DB-v0", num_envs=group, vectorization_mode="sync", backend="sqlite")
    observations, infos = envs.reset(seed=0, options={"task_id": first})
    assert list(infos["task_id"]) == [first] * group and len(set(observations)) == 1
    finished = np.zeros(group, dtype=bool)
    replies = [SELECT, "Action: Answer\nFinal Answer: []", "?", SELECT]
    while not finished.all():
        _, _, terminated, truncated, infos = envs.step(tuple(replies))
        # A copy's first episode is the group's task; later steps of a copy that finished early
        # (its autoreset, then a new episode) are not part of the group.
        assert all(infos["task_id"][i] == first for i in range(group) if not finished[i])
        finished |= terminated | truncated
        replies = ["Action: Answer\nFinal Answer: []"] * group
    # The next group: every copy starts on the new task with a real first step.
    _, infos = envs.reset(seed=1, options={"task_id": second})
    assert list(infos["task_id"]) == [second] * group
    *_, infos = envs.step((SELECT,) * group)
    assert list(infos["task_id"]) == [second] * group and list(infos["step"]) == [1] * group
    envs.close()


def test_two_groups_in_one_vector_env_through_reset_mask() -> None:
    first, second = _task_ids(2)
    envs = gym.vector.SyncVectorEnv([DB] * 4)
    envs.reset(seed=0, options={"task_id": first})
    mask = np.array([False, False, True, True])
    _, infos = envs.reset(seed=0, options={"task_id": second, "reset_mask": mask})
    assert list(infos["_task_id"]) == [False, False, True, True]
    *_, infos = envs.step((SELECT,) * 4)
    assert list(infos["task_id"]) == [first, first, second, second]
    envs.close()


def test_async_groups_with_same_step_autoreset() -> None:
    first, second = _task_ids(2)
    envs = gym.vector.AsyncVectorEnv([DB] * 3, shared_memory=False,
                                     autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.reset(seed=0, options={"task_id": first})
    *_, terminated, truncated, infos = envs.step(("Action: Answer\nFinal Answer: []", SELECT, "?"))
    assert list(terminated | truncated) == [True, False, False]
    # The ended copy's own end is under final_info; it has already been reset (no options).
    assert infos["final_info"]["task_id"][0] == first
    assert infos["final_info"]["finish_reason"][0] is FinishReason.COMPLETE
    _, infos = envs.reset(seed=1, options={"task_id": second})
    *_, infos = envs.step((SELECT,) * 3)
    assert list(infos["task_id"]) == [second] * 3 and list(infos["step"]) == [1] * 3
    envs.close()


def test_async_next_step_keeps_a_pending_autoreset_across_reset() -> None:
    """gymnasium 1.4's behaviour that docs/training.md describes: with shared_memory=False and
    next-step autoreset, an explicit reset() does not clear a copy's pending autoreset, so its
    first step resets it again, with neither seed nor options. After a reset with options the env
    notices and raises LostResetOptionsError, after a reset with a seed as after one with options
    (tests/domains/test_groups_sticky.py); the copy would otherwise have played another task.
    If this starts failing, gymnasium fixed it: update "Vector envs" and "Groups (GRPO)" in
    docs/training.md, and NEXT_STEP_ASYNC there."""
    first, _ = _task_ids(2)
    envs = gym.vector.AsyncVectorEnv([DB] * 2, shared_memory=False)
    envs.reset(seed=0, options={"task_id": first})
    envs.step(("Action: Answer\nFinal Answer: []", SELECT))  # copy 0 ends
    envs.reset(seed=1)
    with pytest.raises(LostResetOptionsError, match="'seed'"):  # copy 0 was reset again, seedless
        envs.step((SELECT, SELECT))
    envs.close()
