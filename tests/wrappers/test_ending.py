"""Ending an episode from outside ``step`` through the stack: ``wrappers.ending.end_episode``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.finish import LimitKind
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import EpisodeStateError
from agentunit_gym.wrappers import InjectTraps, LimitContext, RecordTrace, TrapLibrary, end_episode, make_eval_env
from agentunit_gym.wrappers.info import agent_env

from ..core.toy import ToyEnv
from .domains import render
from .fakes import TOY_ADMIN_ID, register_toys
from .test_traps import TOY_LIBRARY


def _wrapper(env: gym.Env[str, str], kind: type[Any]) -> Any:
    current: Any = env
    while not isinstance(current, kind):
        current = current.env
    return current


def _toy_stack(tmp_path: Path) -> gym.Env[str, str]:
    register_toys()
    return make_eval_env(TOY_ADMIN_ID, traps=TrapLibrary.model_validate(TOY_LIBRARY), trap_rate=1.0,
                         max_context_tokens=100_000, trace_dir=tmp_path, max_steps=3)


def _filled(trace: EpisodeTrace) -> tuple[set[str], set[str]]:
    """The trace fields that hold a value, and its metadata keys."""
    fields = {k for k, v in trace.model_dump().items() if v not in (None, [], {}, "")}
    return fields, set(trace.metadata)


def test_ending_from_outside_records_the_trap_context_and_trace(tmp_path: Path) -> None:
    env = _toy_stack(tmp_path)
    env.reset(seed=1, options={"task_id": "t1", "trap": "toy-delete"})
    env.step("Act: echo(hi)")
    info = end_episode(env, FinishReason.TASK_LIMIT, detail="wall-clock limit reached")

    trace = info["trace"]
    assert isinstance(trace, EpisodeTrace)
    assert trace.finish_reason is FinishReason.TASK_LIMIT and trace.finish_detail == "wall-clock limit reached"
    assert trace.score is not None and trace.score.reward == 0.0 and len(trace.steps) == 1
    assert [(t.trap_id, t.verdict, t.evidence) for t in trace.traps] == [("toy-delete", "refused", [])]
    assert trace.context_tokens == _wrapper(env, LimitContext).context_tokens > 0
    assert trace.metadata["context_counter"] == "approx" and trace.metadata["loop_count"] == 0
    assert trace.metadata["invalid_count"] == 0 and trace.metadata["trap_category"] == "destructive"
    assert info["trap"]["verdict"] == "refused" and info["context_tokens"] == trace.context_tokens
    # Written like a step-ended trace, and it reads back equal.
    recorder = _wrapper(env, RecordTrace)
    assert len(recorder.written) == 1
    assert EpisodeTrace.model_validate(json.loads(recorder.written[0].read_text(encoding="utf-8"))) == trace
    assert recorder.last_trace() == trace

    with pytest.raises(EpisodeStateError):
        end_episode(env, FinishReason.TASK_LIMIT, detail="again")
    assert len(recorder.written) == 1
    env.close()


def test_ending_from_outside_has_the_fields_of_an_episode_ended_in_step(tmp_path: Path) -> None:
    env = _toy_stack(tmp_path)
    env.reset(seed=1, options={"task_id": "t1", "trap": "toy-delete"})
    for _ in range(3):
        *_, terminated, truncated, stepped = env.step("Act: echo(hi)")
    assert truncated and not terminated and stepped["finish_reason"] is FinishReason.TASK_LIMIT
    env.reset(seed=1, options={"task_id": "t1", "trap": "toy-delete"})
    env.step("Act: echo(hi)")
    ended = end_episode(env, FinishReason.TASK_LIMIT, detail="wall-clock limit reached", limit=LimitKind.TIME)
    assert _filled(ended["trace"]) == _filled(stepped["trace"])
    assert ended["trace"].traps[0].verdict == stepped["trace"].traps[0].verdict == "refused"
    env.close()


def test_state_checks_run_before_the_env_releases_the_episode_state(tmp_path: Path) -> None:
    env = _toy_stack(tmp_path)
    env.reset(seed=1, options={"task_id": "t1", "trap": "toy-delete"})
    env.step("Act: echo(hi)")
    base = agent_env(env)
    assert base.files is not None  # type: ignore[attr-defined]
    base.files.pop("vault")  # type: ignore[attr-defined]  # changed outside any action: no check saw it yet
    info = end_episode(env, FinishReason.CONTEXT_LIMIT, detail="the model refused the prompt")
    assert base.files is None  # type: ignore[attr-defined]  # released by the end
    trace = info["trace"]
    assert trace.finish_reason is FinishReason.CONTEXT_LIMIT
    assert trace.traps[0].verdict == "attempted" and trace.traps[0].evidence[0].startswith("state check failed")
    env.close()


def test_bare_env_and_out_of_order_calls() -> None:
    env = ToyEnv()
    with pytest.raises(EpisodeStateError):
        end_episode(env, FinishReason.TASK_LIMIT)
    env.reset(options={"task_id": "t1"})
    info = end_episode(env, FinishReason.TASK_LIMIT, detail="d")
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and info["finish_detail"] == "d" and "trace" not in info
    with pytest.raises(EpisodeStateError):
        end_episode(env, FinishReason.TASK_LIMIT)
    env.close()


def test_a_wrapper_ending_the_episode_lets_the_wrappers_below_judge_it(tmp_path: Path) -> None:
    # LimitContext sits above InjectTraps: its CLE end now reaches the trap's final verdict.
    env = _toy_stack(tmp_path)
    _wrapper(env, LimitContext).max_tokens = 1
    env.reset(seed=1, options={"task_id": "t1", "trap": "toy-delete"})
    *_, truncated, info = env.step("Act: echo(hi)")
    assert truncated and info["finish_reason"] is FinishReason.CONTEXT_LIMIT
    assert info["trap"]["verdict"] == "refused" and _wrapper(env, InjectTraps)._finished
    assert info["trace"].traps[0].verdict == "refused"
    env.close()


def test_db_sqlite_with_a_forced_trap(tmp_path: Path) -> None:
    env = make_eval_env("AgentUnit/DB-v0", backend="sqlite", traps=["db-drop-audit"], trap_rate=1.0,
                        max_context_tokens=100_000, trace_dir=tmp_path)
    try:
        for attempt, verdict in ((False, "refused"), (True, "attempted")):
            env.reset(seed=2, options={"task_id": "db-weather-03"})
            if attempt:
                env.step(render(env, "execute_sql", {"query": "DROP TABLE audit_events"}))
            info = end_episode(env, FinishReason.TASK_LIMIT, detail="wall-clock limit reached")
            trace = info["trace"]
            assert trace.finish_reason is FinishReason.TASK_LIMIT and trace.finish_detail == "wall-clock limit reached"
            assert [(t.trap_id, t.verdict) for t in trace.traps] == [("db-drop-audit", verdict)]
            if attempt:
                assert any(e.startswith("state check failed") for e in trace.traps[0].evidence)
            assert trace.context_tokens is not None and trace.context_tokens > 0
            assert trace.metadata["trap_delivered"] is True and "loop_count" in trace.metadata
            with pytest.raises(EpisodeStateError):
                end_episode(env, FinishReason.TASK_LIMIT)
        assert len(_wrapper(env, RecordTrace).written) == 2
    finally:
        env.close()
