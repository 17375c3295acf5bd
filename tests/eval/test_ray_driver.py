"""The driver's loop of ``--ray`` (:meth:`RayEpisodes.run`) against a scripted stand-in for Ray:
fast and deterministic checks of what the two-node test can only provoke (which episode is in
flight on the node that dies is up to timing there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.errors import BackendError, BackendUnavailableError, ConfigError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.work import WorkItem
from agentunit_gym.eval.record.records import EpisodeRecord, RecordWriter, RunPaths, read_records
from agentunit_gym.eval.run import cluster
from agentunit_gym.eval.run.cluster import RayEpisodes, _Worker
from agentunit_gym.eval.run.cluster_node import EpisodeOutcome
from agentunit_gym.eval.run.slots import RecordSink


class RayError(Exception):
    pass


class RayTaskError(RayError):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class ActorDiedError(RayError):
    pass


class Ref:
    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error


class FakeRay:
    class exceptions:  # noqa: N801 - stands in for the ray.exceptions module
        RayError = RayError
        RayTaskError = RayTaskError

    def __init__(self) -> None:
        self.killed: list[Any] = []

    def wait(self, refs: list[Ref], num_returns: int = 1, timeout: float | None = None) -> tuple[list[Ref], list[Ref]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        self.killed.append(actor)


Behaviour = Callable[[str, WorkItem, int], Ref]


class Method:
    def __init__(self, fn: Callable[..., Ref]) -> None:
        self.remote = fn


class Actor:
    def __init__(self, node: str, behaviour: Behaviour) -> None:
        self.node = node
        self.calls: list[tuple[str, int]] = []

        def run(item: WorkItem, attempts: int) -> Ref:
            self.calls.append((item.key, attempts))
            return behaviour(node, item, attempts)

        self.run = Method(run)


def done(node: str, item: WorkItem, attempts: int) -> Ref:
    record = EpisodeRecord(key=item.key, env_id=item.env_id, task_id=item.task_id, run=item.run, seed=item.seed,
                           agent="oracle", status="done", attempts=attempts, success=True, reward=1.0)
    return Ref(EpisodeOutcome(item.key, node, [(record, None)], attempts))


def dies(node: str, item: WorkItem, attempts: int) -> Ref:
    return Ref(error=ActorDiedError("The actor died because its node has died."))


ITEMS = [WorkItem("AgentUnit/DB-v0", f"t{i}", 0, i) for i in range(6)]


def drive(tmp_path: Path, actors: list[Actor], monkeypatch: pytest.MonkeyPatch, **config: Any,
          ) -> tuple[list[EpisodeRecord], FakeRay]:
    fake = FakeRay()
    monkeypatch.setattr(cluster, "import_ray", lambda: fake)
    runner = RayEpisodes("127.0.0.1:1")
    runner._config = EvalConfig(envs=("DB-v0",), concurrency=config.pop("concurrency", 4), **config)
    runner._label = "oracle"
    runner._workers = [_Worker(actor, actor.node, 2) for actor in actors]
    writer = RecordWriter(RunPaths(tmp_path))
    try:
        runner.run(list(ITEMS), RecordSink(writer, 0, len(ITEMS), None))
    finally:
        writer.close()
    return read_records(tmp_path / "episodes.jsonl"), fake


def test_a_dead_nodes_episodes_run_on_the_other_node_through_the_retry_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lost, kept = Actor("lost", dies), Actor("kept", done)
    records, fake = drive(tmp_path, [lost, kept], monkeypatch)
    assert sorted(r.key for r in records) == sorted(it.key for it in ITEMS)  # each once
    assert all(r.node == "kept" and r.status == "done" for r in records)
    assert lost.calls and all(attempts == 1 for _, attempts in lost.calls)
    retried = {key for key, _ in lost.calls}
    assert {r.key for r in records if r.attempts == 2} == retried  # attempt + 1, as a BackendError would
    assert fake.killed == [lost]  # no more work is sent to it
    assert len(lost.calls) == 2  # its 2 slots' worth, then nothing


def test_an_episode_failed_by_every_node_is_recorded_as_infra_error_once_retries_are_spent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stuck(node: str, item: WorkItem, attempts: int) -> Ref:
        if item.task_id == "t0":
            return Ref(EpisodeOutcome(item.key, node, [], attempts, failure="BackendTimeoutError: stuck"))
        return done(node, item, attempts)

    actor = Actor("a", stuck)
    records, _ = drive(tmp_path, [actor], monkeypatch, max_infra_retries=2)
    by_key = {r.key: r for r in records}
    assert len(records) == 6
    failed = by_key[ITEMS[0].key]
    assert failed.status == "infra_error" and failed.attempts == 3 and "stuck" in failed.error
    assert [a for k, a in actor.calls if k == ITEMS[0].key] == [1, 2, 3]


def test_an_infrastructure_error_raised_on_a_node_is_retried_and_a_config_error_fails_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def flaky(node: str, item: WorkItem, attempts: int) -> Ref:
        if attempts == 1:
            return Ref(error=RayTaskError(BackendError("the daemon went away")))
        return done(node, item, attempts)

    records, _ = drive(tmp_path / "a", [Actor("a", flaky)], monkeypatch)
    assert len(records) == 6 and all(r.status == "done" and r.attempts == 2 for r in records)

    def misconfigured(node: str, item: WorkItem, attempts: int) -> Ref:
        return Ref(error=RayTaskError(ConfigError("unknown option")))

    with pytest.raises(ConfigError, match="unknown option"):
        drive(tmp_path / "b", [Actor("a", misconfigured)], monkeypatch)


def test_losing_every_node_stops_the_run_with_a_typed_error_and_keeps_what_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def dies_after_two(node: str, item: WorkItem, attempts: int) -> Ref:
        return done(node, item, attempts) if item.task_id in ("t0", "t1") else dies(node, item, attempts)

    with pytest.raises(BackendUnavailableError, match="--resume"):
        drive(tmp_path, [Actor("only", dies_after_two)], monkeypatch)
    assert sorted(r.task_id for r in read_records(tmp_path / "episodes.jsonl")) == ["t0", "t1"]


def test_a_result_for_an_episode_already_recorded_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def twice(node: str, item: WorkItem, attempts: int) -> Ref:
        outcome = done(node, item, attempts).value
        outcome.records = outcome.records * 2  # a late duplicate of the same episode
        return Ref(outcome)

    records, _ = drive(tmp_path, [Actor("a", twice)], monkeypatch)
    lines = (tmp_path / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(records) == 6
