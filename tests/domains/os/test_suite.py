"""The bundled OS suite: its shape, and the oracle on every backend.

The oracle replays each task's reference solution through ``env.render_action`` and must
score 1; a deliberately wrong commit (a wrong answer, or ``finish`` without doing the work)
must score 0. One env per backend is reused across tasks, as an evaluator would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.task import OSTask

SUITE: list[OSTask] = [t for t in get_domain("os").bundled_tasks() if isinstance(t, OSTask)]
LOCAL = [t for t in SUITE if t.supports("local")]


def test_suite_shape() -> None:
    assert len(SUITE) >= 40
    assert len({t.id for t in SUITE}) == len(SUITE)
    categories = Counter(t.category for t in SUITE)
    assert set(categories) >= {"files", "text", "permissions", "users", "processes", "archives", "config"}
    commits = Counter(t.reference_solution[-1].tool for t in SUITE)
    assert commits["answer"] >= 15 and commits["finish"] >= 15
    assert {t.evaluation.method for t in SUITE} == {"match", "check"}
    assert any(t.start is not None for t in SUITE)
    for task in SUITE:
        assert task.optimal_steps == len(task.reference_solution), task.id
        if task.backends is not None:
            assert task.backend_note, f"{task.id} limits its backends without saying why"
    assert len(LOCAL) >= 35


def _oracle(env: OSEnv, task: OSTask) -> float:
    env.reset(options={"task_id": task.id})
    reward = 0.0
    for step in task.reference_solution:
        _, reward, terminated, truncated, info = env.step(env.render_action(step))
        if terminated or truncated:
            assert info["finish_reason"].value == "complete", info
            break
    return reward


def _wrong(env: OSEnv, task: OSTask) -> float:
    env.reset(options={"task_id": task.id})
    if task.reference_solution[-1].tool == "answer":
        reply = f"Think: guess.\nAct: answer(wrong-{task.id})"
    else:
        reply = "Think: nothing to do.\nAct: finish"
    _, reward, terminated, _, info = env.step(reply)
    assert terminated and info["score"]["success"] is False
    return reward


@pytest.fixture(scope="module")
def local_env() -> Iterator[OSEnv]:
    env = OSEnv(backend="local")
    yield env
    env.close()


@pytest.fixture(scope="module")
def docker_env() -> Iterator[OSEnv]:
    env = OSEnv(backend="docker")
    yield env
    env.close()


@pytest.mark.parametrize("task", LOCAL, ids=[t.id for t in LOCAL])
def test_oracle_solves_on_local(local_env: OSEnv, task: OSTask) -> None:
    assert _oracle(local_env, task) == 1.0


@pytest.mark.parametrize("task", LOCAL, ids=[t.id for t in LOCAL])
def test_wrong_commit_fails_on_local(local_env: OSEnv, task: OSTask) -> None:
    assert _wrong(local_env, task) == 0.0


@pytest.mark.docker
@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_oracle_solves_on_docker(docker_env: OSEnv, task: OSTask) -> None:
    assert _oracle(docker_env, task) == 1.0


@pytest.mark.docker
@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_wrong_commit_fails_on_docker(docker_env: OSEnv, task: OSTask) -> None:
    assert _wrong(docker_env, task) == 0.0
