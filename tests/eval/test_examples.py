"""The examples run: the RL example's reward curve rises, the agent loop solves its task, the rollout
collector writes one chat trajectory per episode."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import wire_messages
from agentunit_gym.eval.record.export import TRAJECTORY_COLUMNS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rl_reward_curve_rises() -> None:
    rl = load("rl_bandit")
    rewards = rl.train(episodes=240, num_envs=4, n_tasks=6, seed=1)
    assert len(rewards) == 240
    early, late = np.mean(rewards[:40]), np.mean(rewards[-40:])
    # Chance is 1/4 (one right plan of four); the trained policy should be near 1.
    assert early < 0.6
    assert late > early + 0.25 and late >= 0.8


def test_candidates_hold_exactly_one_right_plan() -> None:
    rl = load("rl_bandit")
    tasks, candidates, correct = rl.make_candidates(5, seed=3)
    for t in tasks:
        assert len(candidates[t.id]) == rl.CANDIDATES
        assert sum(1 for plan in candidates[t.id] if plan == candidates[t.id][correct[t.id]]) == 1


def test_agent_loop_example() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "agent_loop.py")], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "complete, reward 1.0" in done.stdout


def _check_conversation(messages: list[dict[str, Any]]) -> None:
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    pending = None
    for message in messages:
        assert message["role"] in ("system", "user", "assistant", "tool")
        if message["role"] == "tool":
            assert message["tool_call_id"] == pending
        pending = message["tool_calls"][0]["id"] if message.get("tool_calls") else None


def test_rollouts_example_writes_one_row_per_episode(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "rollouts.parquet"
    done = subprocess.run([sys.executable, str(EXAMPLES / "rollouts.py"), "--env", "DB-v0", "--backend", "sqlite",
                           "--episodes", "40", "--output", str(out)], capture_output=True, text=True, timeout=300,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "40 episodes written" in done.stdout
    table = pq.read_table(out)
    assert table.num_rows == 40 and table.column_names == list(TRAJECTORY_COLUMNS)
    rows = table.to_pylist()
    assert len({r["seed"] for r in rows}) == 40  # one seed per episode, each replays its episode
    assert {r["backend"] for r in rows} == {"sqlite"} and {r["split"] for r in rows} <= {"train", "test"}
    assert {r["reward_model"]["style"] for r in rows} <= {"rule", "env"}
    assert all(r["reward_model"]["ground_truth"] for r in rows if r["reward_model"]["style"] == "rule")
    for row in rows:
        messages = [{k: v for k, v in m.items() if v is not None or k == "content"} for m in row["messages"]]
        _check_conversation(messages)
        assert messages[: len(row["prompt"])] == [
            {k: v for k, v in m.items() if v is not None or k == "content"} for m in row["prompt"]]
        # The random agent's replies are JSON tool calls: each one is answered by a tool message.
        turns = messages[len(row["prompt"]):]
        assert [m["role"] for m in turns] == ["assistant", "tool"] * row["steps"]
        assert len(row["rewards"]) == row["steps"] >= 1 and row["reward"] == pytest.approx(sum(row["rewards"]))
        assert row["env_id"] == "AgentUnit/DB-v0" and row["task_id"] and row["finish_reason"]
        assert json.loads(row["score"])["reward"] == pytest.approx(row["rewards"][-1])


def test_rollouts_with_a_model_endpoint_record_what_the_model_was_sent() -> None:
    rollouts = load("rollouts")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        answered = sum(1 for m in body["messages"] if m["role"] == "tool"
                       and not str(m["tool_call_id"]).startswith("example_"))
        call = ({"name": "execute_sql", "arguments": '{"query": "SELECT 1"}'} if answered == 0
                else {"name": "submit_answer", "arguments": '{"answer": ["1"]}'})
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"model-{answered}", "type": "function", "function": call}]}

    with FakeChatServer(respond) as server:
        rows = rollouts.collect("DB-v0", episodes=6, num_envs=3, backend="sqlite", base_url=server.base_url,
                                model="m", style="tools")
        sent = [r["messages"] for r in server.requests]
    assert len(rows) == 6
    for row in rows:
        _check_conversation(row["messages"])
        assert [m["tool_calls"][0]["id"] for m in row["messages"][len(row["prompt"]):] if m.get("tool_calls")] == [
            "model-0", "model-1"]  # the model's own call ids
        # The model's two requests of this episode are prefixes of the row's conversation (in wire
        # form: a tool call's null content goes as "", wire_messages).
        assert sum(1 for s in sent if wire_messages(row["messages"][: len(s)]) == s) >= 2
