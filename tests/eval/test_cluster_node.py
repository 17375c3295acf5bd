"""The Ray actor's side of ``eval --ray`` without Ray: :class:`NodeEpisodes` runs each work item
on the evaluator's episode engine, keeps its copies and agents for the next calls, and hands
a stuck copy's item back to the driver as a failure."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from typing import Any

import pytest

from agentunit_gym.eval.agents.builtin import OracleAgent
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.work import WorkItem
from agentunit_gym.eval.run.cluster_node import NodeEpisodes
from agentunit_gym.eval.run.engine import EpisodeEngine
from tests.core.toy import ToyEnv
from tests.eval.slow_agent import StuckToy

TOY = "AgentUnit/Toy-v0"


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    context = types.SimpleNamespace(get_node_id=lambda: "node-a")
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(get_runtime_context=lambda: context))


class Made:
    envs: list[ToyEnv] = []

    @staticmethod
    def factory(env_id: str, options: dict[str, Any]) -> ToyEnv:
        env = ToyEnv()
        Made.envs.append(env)
        return env


def test_a_node_runs_its_items_on_the_engine_and_reuses_its_copy(fake_ray: None) -> None:
    Made.envs = []
    node = NodeEpisodes(EvalConfig(envs=("Toy-v0",)), OracleAgent, "oracle", Made.factory, slots=2)
    assert isinstance(node._engine, EpisodeEngine) and node.node_id() == "node-a"

    async def two() -> list[Any]:
        return [await node.run(WorkItem(TOY, task, 0, seed), 1) for task, seed in (("t1", 5), ("t2", 6))]

    try:
        outcomes = asyncio.run(two())
    finally:
        node.close()
    assert [(o.key, o.node, o.failure, o.attempts) for o in outcomes] == [
        (f"{TOY}|t1|0", "node-a", "", 1), (f"{TOY}|t2|0", "node-a", "", 1)]
    records = [record for o in outcomes for record, _ in o.records]
    assert [(r.task_id, r.status, r.success, r.steps, r.seed) for r in records] == [
        ("t1", "done", True, 2, 5), ("t2", "done", True, 1, 6)]
    assert all(trace is not None and trace.episode_id == r.key for o in outcomes for r, trace in o.records)
    # One copy made for both calls (its setup counted once), closed with the node.
    assert len(Made.envs) == 1 and Made.envs[0]._closed
    assert outcomes[0].setup_s > 0 and outcomes[1].setup_s == 0


def test_a_stuck_copy_is_dropped_and_its_item_goes_back_to_the_driver(
        fake_ray: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.eval.run import deadlines

    monkeypatch.setattr(deadlines, "STEP_GRACE_S", 0.2)
    StuckToy.release, StuckToy.returned = threading.Event(), threading.Event()
    node = NodeEpisodes(EvalConfig(envs=("Toy-v0",), episode_timeout_s=1.0), OracleAgent, "oracle",
                        lambda env_id, options: StuckToy(), slots=1)
    try:
        outcome = asyncio.run(node.run(WorkItem(TOY, "t1", 0, 3), 2))
        assert outcome.records == [] and outcome.attempts == 2
        assert outcome.failure.startswith("BackendTimeoutError") and "stuck" in outcome.failure
        assert node._all == []  # the stuck copy is not handed to the next call
    finally:
        StuckToy.release.set()
        node.close()
