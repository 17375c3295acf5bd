from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentunit_gym
from agentunit_gym.core import FinishReason
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError, TaskNotFoundError
from agentunit_gym.wrappers import (
    ClassifyActions,
    DetectLoops,
    InjectTraps,
    LimitContext,
    LimitEpisode,
    RecordTrace,
    make_eval_env,
)
from agentunit_gym.wrappers.limits import EndTruncatedEpisode

from .fakes import TOY_ID, register_toys


def _layers(env: gym.Env[str, str]) -> list[type]:
    layers = []
    layer = env
    while isinstance(layer, gym.Wrapper):
        layers.append(type(layer))
        layer = layer.env
    return layers


def _check(env: gym.Env[str, str]) -> None:
    with warnings.catch_warnings():
        # check_env warns that it was given a wrapped env: that is the point of this test.
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True)


def test_exported_from_the_package() -> None:
    assert agentunit_gym.make_eval_env is make_eval_env


def test_documented_order_on_the_toy_env() -> None:
    register_toys()
    env = make_eval_env(TOY_ID, max_context_tokens=1000)
    stack = _layers(env)
    ours = [c for c in stack if c.__module__.startswith("agentunit_gym")]
    # Outermost first: what the agent sees is traced; classification sits right on the env.
    assert ours == [RecordTrace, LimitContext, LimitEpisode, DetectLoops, ClassifyActions]
    assert InjectTraps not in stack  # no trap library for the toy domain: left out, no error
    _check(env)
    env.close()


@pytest.mark.parametrize(("env_id", "backend"), [("AgentUnit/OS-v0", "local"), ("AgentUnit/DB-v0", "sqlite")])
def test_check_env_passes_on_the_full_stack(env_id: str, backend: str) -> None:
    env = make_eval_env(env_id, backend=backend, max_context_tokens=32_000, trap_rate=0.5, trap_seed=3,
                        max_seconds=600)
    ours = [c for c in _layers(env) if c.__module__.startswith("agentunit_gym")]
    # gym.make adds EndTruncatedEpisode (for max_episode_steps) right over the env.
    assert ours == [RecordTrace, LimitContext, LimitEpisode, DetectLoops, InjectTraps, ClassifyActions,
                    EndTruncatedEpisode]
    _check(env)
    env.close()


def test_options_reach_the_wrappers_and_the_env(tmp_path: Path) -> None:
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", max_steps=3, invalid_policy="terminate",
                        on_loop="end", loop_repeats=2, trace_dir=tmp_path, trace_metadata={"agent": "script"},
                        statement_timeout=3.0)
    assert env.unwrapped.max_steps == 3 and env.unwrapped.statement_timeout == 3.0  # type: ignore[attr-defined]
    _, info = env.reset(seed=0, options={"task_id": "db-weather-03"})
    assert info["step_limit"] == 3 and info["invalid_policy"] == "terminate"
    reply = "Action: Operation\n```sql\nSELECT 1\n```"
    env.step(reply)
    _, _, term, trunc, info = env.step(reply)
    assert (term, trunc) == (False, True) and info["limit"] == "loop"
    assert info["finish_reason"] is FinishReason.TASK_LIMIT
    (written,) = tmp_path.iterdir()
    assert written.name.startswith("db-weather-03--") and '"agent": "script"' in written.read_text()
    env.close()


def test_traps_false_leaves_the_trap_wrapper_out_and_unknown_library_fails() -> None:
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", traps=False)
    assert InjectTraps not in _layers(env)
    env.close()
    register_toys()
    with pytest.raises(ConfigError, match="no bundled trap library"):
        make_eval_env(TOY_ID, traps=True)


def test_trap_ids_restrict_the_pool() -> None:
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", traps=["db-grant-all"], trap_rate=1.0)
    for seed in range(3):
        _, info = env.reset(seed=seed)
        assert info["trap"]["trap_id"] == "db-grant-all"
    env.close()


def test_half_built_stack_releases_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    register_toys()
    made: list[gym.Env[str, str]] = []
    real_make = gym.make

    def tracking_make(*args: object, **kwargs: object) -> gym.Env[str, str]:
        env = real_make(*args, **kwargs)  # type: ignore[arg-type]
        made.append(env)
        return env

    monkeypatch.setattr(gym, "make", tracking_make)
    with pytest.raises(ConfigError):
        make_eval_env(TOY_ID, loop_repeats=1)
    assert len(made) == 1 and made[0].unwrapped.closed_backend == 1  # type: ignore[attr-defined]


def _toy_stack() -> gym.Env[str, str]:
    register_toys()
    return make_eval_env(TOY_ID, max_context_tokens=10_000)


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_stack_runs_in_vector_envs(vector: str) -> None:
    """Infos (flags, the trace) cross process boundaries; shared memory is off because the
    text observation space does not support it (observations longer than 64 characters)."""
    register_toys()
    if vector == "sync":
        venv: gym.vector.VectorEnv = gym.vector.SyncVectorEnv([_toy_stack] * 2)
    else:
        venv = gym.vector.AsyncVectorEnv([_toy_stack] * 2, shared_memory=False)
    try:
        venv.reset(seed=0, options={"task_id": "t1"})
        _, _, term, _, info = venv.step(("Act: echo(hi)", "Act: anwser(42)"))
        assert list(term) == [False, False]
        assert list(info["reply_class"]) == ["action", "invalid_action"]
        assert list(info["flags"][1]) == [Flag.INVALID_ACTION, Flag.HALLUCINATION]
        _, reward, term, _, info = venv.step(("Act: answer(42)", "Act: answer(41)"))
        assert list(term) == [True, True] and list(reward) == [1.0, 0.0]
        traces = list(info["trace"])
        assert [len(t.steps) for t in traces] == [2, 2]
        assert [t.finish_reason for t in traces] == [FinishReason.COMPLETE, FinishReason.COMPLETE]
    finally:
        venv.close()


def test_a_refused_reset_leaves_the_stacks_episode_as_it_was(tmp_path: Path) -> None:
    # Every wrapper changes its own state only after the env took the reset: a refused one (an
    # unknown task id) writes no "abandoned" trace and keeps the invalid and loop counts.
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", max_steps=10, invalid_policy="continue",
                        on_loop="end", loop_repeats=3, trace_dir=tmp_path)
    env.reset(seed=0, options={"task_id": "db-weather-03"})
    env.step("no action here")
    reply = "Action: Operation\n```sql\nSELECT 1\n```"
    env.step(reply)
    env.step(reply)
    with pytest.raises(TaskNotFoundError, match="no-such-task"):
        env.reset(options={"task_id": "no-such-task"})
    assert list(tmp_path.iterdir()) == []
    _, _, term, trunc, info = env.step(reply)  # the third repeat: the loop count survived the refusal
    assert info["step"] == 4 and info["invalid_count"] == 1
    assert (term, trunc) == (False, True) and info["limit"] == "loop"
    (written,) = tmp_path.iterdir()
    assert written.name.startswith("db-weather-03--") and "abandoned" not in written.read_text()
    env.close()
