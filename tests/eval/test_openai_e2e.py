"""The OpenAI-compatible agent end to end: a fake model server on loopback (real HTTP) plays
each task's reference solution through the real OS (local) and DB (sqlite) envs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.eval.agents.fake_server import FakeChatServer, reference_responder
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.run.runner import EvalConfig, RunPaths, load_trace, read_records


def solutions(env_id: str, backend: str) -> dict[str, list[tuple[str, dict[str, Any], str]]]:
    env = gym.make(env_id, backend=backend)
    base: Any = env.unwrapped
    try:
        out = {}
        for task in base.tasks:
            out[task.instruction] = [(s.tool, base.codec.arguments_of(s), base.render_action(s))
                                     for s in task.reference_solution]
        return out
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["react", "tools"])
def test_chat_agent_solves_os_and_db_through_a_fake_server(tmp_path: Path, mode: str) -> None:
    table = {**solutions("AgentUnit/OS-v0", "local"), **solutions("AgentUnit/DB-v0", "sqlite")}
    with FakeChatServer(reference_responder(table)) as server:
        config = EvalConfig(envs=("OS-v0", "DB-v0"), backends=("local", "sqlite"), agent="openai:fake-model",
                            n=4, concurrency=2, seed=1)
        result = evaluate(config, tmp_path, base_url=server.base_url, agent_options={"mode": mode})
    records = read_records(RunPaths(tmp_path).episodes)
    assert len(records) == 8
    assert all(r.status == "done" and r.success for r in records), [(r.key, r.finish_reason) for r in records]
    # One model request per step, each over real HTTP.
    assert len(server.requests) == sum(r.steps for r in records)
    if mode == "tools":
        assert all("tools" in body for body in server.requests)
    metrics = result.summary["overall"]["metrics"]
    assert metrics["success_rate"]["value"] == 1.0
    assert metrics["tokens_in"]["value"] > 0 and metrics["tokens_out"]["value"] > 0
    assert metrics["agent_time"]["value"] > 0
    assert result.summary["config"]["agent"] == "openai:fake-model"


def test_a_model_out_of_context_ends_the_episode_as_cle(tmp_path: Path) -> None:
    table = solutions("AgentUnit/DB-v0", "sqlite")
    env = gym.make("AgentUnit/DB-v0", backend="sqlite")
    try:
        # A task whose reference takes two turns at least, so the refused second request is mid-episode.
        task_id = next(t.id for t in env.unwrapped.tasks if len(t.reference_solution) >= 2)  # type: ignore[attr-defined]
    finally:
        env.close()
    with FakeChatServer(reference_responder(table), context_limit_after=1) as server:
        config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", task_ids=(task_id,),
                            concurrency=1, max_infra_retries=2)
        result = evaluate(config, tmp_path, base_url=server.base_url)
    # The refusal is not retried, by the agent or by the runner.
    assert server.statuses == [200, 400]
    records = read_records(RunPaths(tmp_path).episodes)
    assert [(r.status, r.finish_reason, r.success, r.steps, r.attempts, r.error) for r in records] == [
        ("done", "context_limit", False, 1, 1, "")]
    trace = load_trace(tmp_path, records[0])
    assert trace is not None and trace.finish_reason is FinishReason.CONTEXT_LIMIT and len(trace.steps) == 1
    assert "'fake-model'" in trace.finish_detail and "maximum context length" in trace.finish_detail
    metrics = result.summary["overall"]["metrics"]
    assert metrics["finish_cle_rate"]["value"] == 1.0
    assert metrics["finish_error_rate"]["value"] == 0.0 and metrics["success_rate"]["value"] == 0.0
    assert [(row["env"], row["CLE"], row["Error"]) for row in result.summary["finish_reasons"]] == [
        ("AgentUnit/DB-v0", 1.0, 0.0)]
