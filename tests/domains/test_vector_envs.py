"""gymnasium's own vector envs over every env, with random mixes of replies (issue 20).

Each case drives SyncVectorEnv, AsyncVectorEnv(shared_memory=False) and gym.make_vec over
copies of one env made with ``max_episode_steps=3``, so episodes end (commits, invalid
replies, the step limit) and autoreset within a few steps. Every batched value of every copy
(observation, reward, terminated, truncated, each ``info`` key) must equal what a single env
gives for the same seed and replies, and every ``info`` key must keep one kind of value
across copies, steps and resets (what gymnasium batches by).

It runs for every registered domain, the example domain included (tests/domains/conftest.py).
Sizes: 8 copies and 8 examples per vectorisation; the OS env runs 4 copies and 3 examples
per vectorisation, because every copy is a local sandbox (namespaces,
a shell) and the test machine has 2 cores.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentunit_gym  # noqa: F401  (registers the ids)
from tests.domains.conformkit import DomainCase
from tests.domains.vectorkit import CASES, EnvCase, comparable, env_case, per_copy, replies, type_paths

MAX_EPISODE_STEPS = 3
# Huge replies make hypothesis warn about the size of its example's repr.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
MODES = ("sync", "async", "make_vec")
SIZES = {"os": (4, 3)}
"""(copies, hypothesis examples per vectorisation) where the default of :data:`DEFAULT_SIZE` is too
much for the test machine: every OS copy is a local sandbox (namespaces, a shell)."""
DEFAULT_SIZE = (8, 8)


@pytest.fixture(scope="module")
def case(domain_case: DomainCase) -> EnvCase:
    """Every registered domain (tests/domains/conftest.py), the example domain included."""
    return env_case(domain_case.domain)


def make_vector(case: EnvCase, mode: str, copies: int) -> gym.vector.VectorEnv[Any, Any, Any]:
    if mode == "make_vec":
        return gym.make_vec(case.env_id, num_envs=copies, vectorization_mode="async",
                            vector_kwargs={"shared_memory": False}, max_episode_steps=MAX_EPISODE_STEPS,
                            **case.kwargs)
    make = partial(gym.make, case.env_id, max_episode_steps=MAX_EPISODE_STEPS, **case.kwargs)
    if mode == "sync":
        return gym.vector.SyncVectorEnv([make] * copies)
    return gym.vector.AsyncVectorEnv([make] * copies, shared_memory=False)


def single_run(env: gym.Env[str, str], seed: int, plan: list[list[str]], index: int) -> list[tuple[Any, ...]]:
    """What a vector env's copy ``index`` should report: reset, then each step with gymnasium's
    default (next-step) autoreset: the step after an episode's end is a reset with reward 0."""
    observation, info = env.reset(seed=seed + index)
    results: list[tuple[Any, ...]] = [(observation, info)]
    ended = False
    for replies_now in plan:
        if ended:
            observation, info = env.reset()
            results.append((observation, 0.0, False, False, info))
            ended = False
            continue
        observation, reward, terminated, truncated, info = env.step(replies_now[index])
        results.append((observation, float(reward), terminated, truncated, info))
        ended = terminated or truncated
    return results


@pytest.mark.parametrize("mode", MODES)
def test_batched_values_equal_a_single_envs(domain_case: DomainCase, case: EnvCase, mode: str) -> None:
    name = domain_case.domain.name
    copies, examples = SIZES.get(name, DEFAULT_SIZE)
    reply_pool = replies(case)
    # gymnasium 1.4's AsyncVectorEnv worker with shared_memory=False keeps a copy's pending
    # next-step autoreset across an explicit reset() (docs/training.md, "Vector envs"): each
    # example then gets fresh async copies; the sync one is reused (its reset clears the flag).
    fresh_each_example = mode != "sync"
    vecs = [make_vector(case, mode, copies)]
    examples_run = 0
    singles = [gym.make(case.env_id, max_episode_steps=MAX_EPISODE_STEPS, **case.kwargs) for _ in range(copies)]
    kinds: dict[str, set[str]] = {}

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(seed=st.integers(0, 10_000),
           plan=st.lists(st.lists(st.sampled_from(reply_pool), min_size=copies, max_size=copies),
                         min_size=4, max_size=7))
    def check(seed: int, plan: list[list[str]]) -> None:
        expected = [single_run(env, seed, plan, i) for i, env in enumerate(singles)]
        nonlocal examples_run
        if fresh_each_example and examples_run:
            vecs[-1].close()
            vecs.append(make_vector(case, mode, copies))
        examples_run += 1
        vec = vecs[-1]
        observations, infos = vec.reset(seed=seed)
        for i in range(copies):
            want_obs, want_info = expected[i][0]
            assert observations[i] == want_obs
            assert comparable(per_copy(infos, i)) == comparable(want_info), (name, mode, "reset", i)
            for path, kind in type_paths(want_info).items():
                kinds.setdefault(path, set()).add(kind)
        for t, replies_now in enumerate(plan, start=1):
            observations, rewards, terminated, truncated, infos = vec.step(tuple(replies_now))
            for i in range(copies):
                want_obs, want_reward, want_term, want_trunc, want_info = expected[i][t]
                got = per_copy(infos, i)
                where = (name, mode, "step", t, "copy", i, replies_now[i][:40])
                assert observations[i] == want_obs, where
                assert (float(rewards[i]), bool(terminated[i]), bool(truncated[i])) == \
                    (want_reward, want_term, want_trunc), where
                assert comparable(got) == comparable(want_info), where
                for path, kind in type_paths(want_info).items():
                    kinds.setdefault(path, set()).add(kind)

    try:
        check()
    finally:
        for vec in vecs:
            vec.close()
        for env in singles:
            env.close()
    mixed = {path: sorted(k) for path, k in kinds.items() if len(k) > 1}
    assert not mixed, f"info keys with more than one kind of value: {mixed}"
    # The step keys of docs/core.md are all there, on every step.
    assert {"action", "action_error", "score", "execution", "finish_reason", "limit", "task_id"} <= set(kinds)


def test_the_evaluation_stack_batches_too() -> None:
    """make_eval_env's wrappers (limits, classification, loops, traps at rate 0.5, traces) over
    a SyncVectorEnv: per copy, the same info as a single stack, traces aside (their ids and
    clock times differ by design)."""
    from agentunit_gym import make_eval_env

    make = partial(make_eval_env, "AgentUnit/DB-v0", backend="sqlite", trap_rate=0.5, max_steps=3)
    pool = replies(CASES["db"])
    plan = [[pool[(t * 3 + i) % len(pool)] for i in range(6)] for t in range(7)]
    envs = gym.vector.SyncVectorEnv([make] * 6)
    singles = [make() for _ in range(6)]
    expected = [single_run(env, 5, plan, i) for i, env in enumerate(singles)]
    _, infos = envs.reset(seed=5)
    got = [[per_copy(infos, i)] for i in range(6)]
    for replies_now in plan:
        *_, infos = envs.step(tuple(replies_now))
        for i in range(6):
            got[i].append(per_copy(infos, i))
    for i in range(6):
        for t, info in enumerate(got[i]):
            want = dict(expected[i][t][-1])
            assert ("trace" in info) == ("trace" in want), (i, t)
            info.pop("trace", None)
            want.pop("trace", None)
            assert comparable(info) == comparable(want), (i, t)
    assert any(info.get("trap") for copy in got for info in copy)  # some episodes had a trap
    assert any(info.get("trap") == {} for copy in got for info in copy)  # and some had none
    envs.close()
    for env in singles:
        env.close()
