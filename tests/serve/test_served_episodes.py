"""The episode pool behind the servers, without a protocol: sessions, limits, ends, records."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentunit_gym.errors import BackendError, ConfigError, EpisodeStateError, TaskNotFoundError
from agentunit_gym.eval.record.records import RunPaths, read_records
from agentunit_gym.serve.served_episodes import EpisodePool, EpisodeSettings


def settings(**kwargs: object) -> EpisodeSettings:
    return EpisodeSettings(env_id="DB-v0", backend="sqlite", seed=5, **kwargs)  # type: ignore[arg-type]


def test_each_session_gets_its_own_episode_with_the_next_seed() -> None:
    pool = EpisodePool(settings())
    try:
        first, again, second = pool.get("a"), pool.get("a"), pool.get("b")
        assert first is again and second is not first
        assert (first.seed, second.seed) == (5, 6) and (first.run, second.run) == (0, 1)
        assert first.prompt and [t.name for t in pool.tools] == ["execute_sql", "submit_answer", "commit"]
    finally:
        pool.close()


def test_max_sessions_refuses_a_new_session_until_one_ends() -> None:
    pool = EpisodePool(settings(), max_sessions=1)
    try:
        episode = pool.get("a")
        with pytest.raises(EpisodeStateError, match="--max-sessions 1"):
            pool.get("b")
        outcome = episode.call("commit", {})
        if not outcome.ended:  # a question task: commit is not allowed there, an answer ends it
            outcome = episode.call("submit_answer", {"answer": []})
        assert outcome.ended and outcome.result is not None and outcome.result["finished"]
        assert pool.get("b") is not episode  # an ended episode no longer counts
    finally:
        pool.close()


def test_idle_sessions_are_abandoned_and_recorded(tmp_path: Path) -> None:
    pool = EpisodePool(settings(output=tmp_path), idle_timeout_s=0.0)
    try:
        episode = pool.get("a")
        episode.call("execute_sql", {"query": "SELECT 1"})
        unplayed = pool.get("b")  # asking for any episode reaps the idle ones
        assert episode.ended and episode.result is not None and episode.result["finish_reason"] == "error"
        # The session comes back: it is told its episode ended, it does not get a new one.
        assert pool.get("a") is episode
        again = episode.call("execute_sql", {"query": "SELECT 1"})
        assert again.is_error and "already ended" in again.text and "idle" in again.text
        pool.get("c")
        assert unplayed.ended and unplayed.result is not None and unplayed.result["steps"] == 0
    finally:
        pool.close()
    (record,) = read_records(RunPaths(tmp_path).episodes)  # "b" and "c" took no step: nothing to record
    assert record.status == "agent_error" and "idle" in record.error and record.steps == 1


def test_an_infrastructure_failure_ends_the_episode_as_infra_error(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pool = EpisodePool(settings(output=tmp_path))
    try:
        episode = pool.get("a")

        def dead(action: str) -> object:
            raise BackendError("the database connection dropped")

        monkeypatch.setattr(episode.env, "step", dead)
        outcome = episode.call("execute_sql", {"query": "SELECT 1"})
        assert outcome.is_error and outcome.ended and "connection dropped" in outcome.text
        assert outcome.result is not None and outcome.result["finish_reason"] == "error"
        # Not scored: no reward of 0 to train on, and the error says what failed.
        assert (outcome.result["reward"], outcome.result["success"], outcome.result["score"]) == (None, None, None)
        assert "BackendError" in outcome.result["error"]
        again = episode.call("execute_sql", {"query": "SELECT 1"})
        assert again.is_error and "reward none" in again.text
    finally:
        pool.close()
    (record,) = read_records(RunPaths(tmp_path).episodes)
    assert (record.status, record.finish_reason, record.trace) == ("infra_error", "error", None)
    assert "BackendError" in record.error


def test_a_closed_pool_refuses_sessions_and_an_unknown_task_is_refused_at_once() -> None:
    pool = EpisodePool(settings())
    pool.close()
    pool.close()
    with pytest.raises(EpisodeStateError, match="shutting down"):
        pool.get("a")
    with pytest.raises(TaskNotFoundError, match="no-such"):
        EpisodePool(settings(task_id="no-such"))
    with pytest.raises(ConfigError, match="max_sessions"):
        EpisodePool(settings(), max_sessions=0)
