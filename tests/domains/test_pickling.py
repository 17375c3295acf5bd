"""Envs pickle and copy before and after reset (issue 20); the copy reopens its backend
lazily and does not carry a running episode over."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.errors import ConfigError, EpisodeStateError, InterruptedEpisodeError
from tests.domains.conformkit import DomainCase
from tests.domains.vectorkit import EnvCase, env_case

ROUND_TRIPS: dict[str, Callable[[Any], Any]] = {
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "deepcopy": copy.deepcopy,
}


def _reply(case: EnvCase) -> str:
    return case.valid[0]


@pytest.fixture(scope="module")
def case(domain_case: DomainCase) -> EnvCase:
    """Every registered domain (tests/domains/conftest.py), the example domain included."""
    return env_case(domain_case.domain)


@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_round_trip_before_and_after_reset(case: EnvCase, how: str) -> None:
    round_trip = ROUND_TRIPS[how]
    env = gym.make(case.env_id, **case.kwargs)
    fresh = round_trip(env)  # before any reset: nothing opened yet in the copy
    prompt, info = env.reset(seed=3)
    task_id = info["task_id"]
    running = round_trip(env)  # an episode in flight
    original_step = env.step(_reply(case))
    try:
        with pytest.raises(InterruptedEpisodeError, match=f"{task_id}.*Call reset\\(\\) on the copy"):
            running.step(_reply(case))
        with pytest.raises(EpisodeStateError, match="before reset"):
            fresh.unwrapped.step(_reply(case))  # (gym.make's OrderEnforcing says the same first)
        for copied in (fresh, running):
            copied_prompt, copied_info = copied.reset(options={"task_id": task_id})
            assert (copied_prompt, copied_info["task_id"]) == (prompt, task_id)
            observation, reward, terminated, truncated, step_info = copied.step(_reply(case))
            assert (observation, reward, terminated, truncated) == original_step[:4]
            assert step_info["action"] == original_step[4]["action"]
        # The original keeps its own backend and episode.
        assert env.step(_reply(case))[4]["step"] == 2
    finally:
        for e in (env, fresh, running):
            e.close()


def test_an_ended_episode_is_not_resumed_either() -> None:
    env = gym.make("AgentUnit/DB-v0", backend="sqlite")
    env.reset(seed=0)
    env.step("Action: Answer\nFinal Answer: []")
    copied = pickle.loads(pickle.dumps(env))
    with pytest.raises(EpisodeStateError, match="before reset"):
        copied.unwrapped.step("Action: Answer\nFinal Answer: []")
    assert copied.unwrapped.task is None
    env.close()
    copied.close()


def test_an_env_around_a_given_backend_says_it_cannot_travel() -> None:
    from agentunit_gym.backends.sql.factory import open_sql_backend

    backend = open_sql_backend("sqlite")
    env = gym.make("AgentUnit/DB-v0", sql_backend=backend)
    with pytest.raises(ConfigError, match="cannot be pickled or copied.*backend='sqlite'"):
        pickle.dumps(env)
    env.close()
    backend.close()


def test_async_vector_env_with_spawn_runs_pickled_envs(case: EnvCase) -> None:
    made = [gym.make(case.env_id, **case.kwargs) for _ in range(2)]
    for env in made:
        env.reset(seed=0)  # an episode in flight travels as "needs a reset"
    reference = gym.make(case.env_id, **case.kwargs)
    # Each factory carries a pickled env (made and reset here) and unpickles it in the child
    # process. (A factory must make a new env on each call: AsyncVectorEnv calls the first one
    # in the parent too, for the spaces, and closes what it returns.)
    envs = gym.vector.AsyncVectorEnv([partial(pickle.loads, pickle.dumps(env)) for env in made],
                                     shared_memory=False, context="spawn")
    try:
        observations, infos = envs.reset(seed=10)
        replies = (_reply(case), case.invalid[0])
        _, rewards, terminated, truncated, step_infos = envs.step(replies)
        for i, reply in enumerate(replies):
            prompt, info = reference.reset(seed=10 + i)
            assert (observations[i], infos["task_id"][i]) == (prompt, info["task_id"])
            observation, reward, term, trunc, want = reference.step(reply)
            assert (float(rewards[i]), bool(terminated[i]), bool(truncated[i])) == (reward, term, trunc)
            assert step_infos["step"][i] == 1 and bool(step_infos["action_error"]["_issue"][i]) == (i == 1)
    finally:
        envs.close()
        reference.close()
        for env in made:
            env.close()
