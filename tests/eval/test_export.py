"""Trajectory export: rows from a finished run, the evaluator's own conversations, truncation, full text."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.registry import get_domain
from agentunit_gym.errors import ConfigError, MissingDependencyError
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import wire_messages
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.export import TRAJECTORY_COLUMNS, export_run, write_rows
from agentunit_gym.eval.record.records import iter_records
from tests.cli.clitools import cli


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _random_run(tmp_path: Path, **config: Any) -> Path:
    run = tmp_path / "run"
    evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="random", n=3, seed=1, **config), run)
    return run


def test_rows_hold_the_conversation_rewards_and_ids_of_every_episode(tmp_path: Path) -> None:
    run = _random_run(tmp_path)
    result = export_run(run, tmp_path / "out.jsonl")
    rows = _read_jsonl(tmp_path / "out.jsonl")
    records = {r.key: (r, t) for r, t in iter_records(run)}
    assert result.rows == len(rows) == len(records) == 3 and result.truncated == 0
    for index, row in enumerate(rows):
        assert list(row) == list(TRAJECTORY_COLUMNS)
        record, trace = records[row["extra_info"]["episode"]]
        assert trace is not None
        assert (row["task_id"], row["env_id"], row["seed"]) == (record.task_id, "AgentUnit/DB-v0", record.seed)
        # The bundled tasks' splits, from the reset info through the trace and the record.
        assert row["split"] == record.split == trace.split != "" and row["extra_info"]["index"] == index
        assert row["backend"] == record.backend == trace.backend == "sqlite"
        assert row["rewards"] == [s.reward for s in trace.steps] and row["reward"] == record.reward
        assert row["finish_reason"] == record.finish_reason and row["steps"] == len(trace.steps)
        assert json.loads(row["score"])["components"] == trace.score.components  # type: ignore[union-attr]
        assert row["reward_spec"] == {"method": "env", "ground_truth": record.task_id}
        task = next(t for t in get_domain("db").bundled_tasks() if t.id == record.task_id)
        gold = {"style": "rule", "ground_truth": json.dumps(list(task.answer))} if task.answer is not None else \
            {"style": "env", "ground_truth": ""}
        assert row["reward_model"] == gold
        assert row["data_source"] == row["env_class"] == "AgentUnit/DB-v0"
        assert json.loads(row["tools"]) == trace.tools and trace.tools
        # The random agent sends JSON tool calls: tools style, one tool result per call.
        messages = row["messages"]
        assert messages[: len(row["prompt"])] == row["prompt"] and row["prompt"][-1]["role"] == "user"
        assert row["prompt"][-1]["content"] == trace.prompt
        turns = messages[len(row["prompt"]):]
        assert [m["role"] for m in turns] == ["assistant", "tool"] * len(trace.steps)
        for reply, result_message, step in zip(turns[::2], turns[1::2], trace.steps, strict=True):
            call = reply["tool_calls"][0]
            assert json.loads(step.raw_action) == {"name": call["function"]["name"],
                                                   "arguments": json.loads(call["function"]["arguments"])}
            assert result_message == {"role": "tool", "tool_call_id": call["id"], "content": step.observation}


def test_parquet_rows_equal_the_jsonl_rows(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    run = _random_run(tmp_path)
    export_run(run, tmp_path / "out.jsonl")
    export_run(run, tmp_path / "out.parquet")
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column_names == list(TRAJECTORY_COLUMNS) and table.num_rows == 3
    for from_parquet, from_jsonl in zip(table.to_pylist(), _read_jsonl(tmp_path / "out.jsonl"), strict=True):
        # Parquet gives every message every key (null where a message has none).
        tidy = [{k: v for k, v in m.items() if v is not None or k == "content"} for m in from_parquet["messages"]]
        for message in tidy:
            for call in message.get("tool_calls") or []:
                assert set(call) == {"id", "type", "function"}
        assert tidy == from_jsonl["messages"]
        assert {k: from_parquet[k] for k in ("reward", "rewards", "task_id", "seed", "score", "tools")} == \
            {k: from_jsonl[k] for k in ("reward", "rewards", "task_id", "seed", "score", "tools")}


@pytest.mark.parametrize(("mode", "protocol"), [("tools", "agentunit"), ("react", "agentunit"),
                                              ("tools", "agentbench-fc")])
def test_the_export_is_what_the_openai_agent_sent(tmp_path: Path, mode: str, protocol: str) -> None:
    answer_tool, answer_key = ("commit_final_answer", "answers") if protocol == "agentbench-fc" else (
        "submit_answer", "answer")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        number = len(server.requests)  # counted before it is answered; concurrency 1: 3 requests an episode
        turn = (number - 1) % 3
        if turn == 1:
            return {"role": "assistant", "content": "Hmm, thinking."}
        if mode == "react":
            return {"role": "assistant", "content": "Action: Operation\n```sql\nSELECT 1\n```" if turn == 0
                    else 'Action: Answer\nFinal Answer: ["1"]'}
        call = ({"name": "execute_sql", "arguments": '{ "query" : "SELECT 1" }'} if turn == 0
                else {"name": answer_tool, "arguments": json.dumps({answer_key: ["1"]})})
        return {"role": "assistant", "content": "Let me look." if turn == 0 else None,
                "tool_calls": [{"id": f"m-{number}", "type": "function", "function": call}]}

    with FakeChatServer(respond) as server:
        run = tmp_path / "run"
        evaluate(EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:m", n=2, concurrency=1,
                            protocol=protocol, agent_settings={"mode": mode, "base_url": server.base_url}),
                 run, base_url=server.base_url, agent_options={"mode": mode}, check_endpoint=False)
        requests = [r["messages"] for r in server.requests]
        tools_sent = server.requests[0].get("tools")
    export_run(run, tmp_path / "out.jsonl")
    rows = _read_jsonl(tmp_path / "out.jsonl")
    assert len(rows) == 2 and len(requests) == 6
    for number, row in enumerate(rows):  # concurrency 1: each episode's three requests in turn
        for sent in requests[3 * number: 3 * number + 3]:
            # every request is a prefix of the exported conversation (in wire form: a tool call's
            # null content goes as "", wire_messages)
            assert wire_messages(row["messages"][: len(sent)]) == sent
        assert wire_messages(row["prompt"]) == requests[3 * number]
        turns = row["messages"][len(row["prompt"]):]
        assert row["finish_reason"] == "complete" and len(turns) == 6
        if mode == "react":
            assert [m["role"] for m in turns] == ["assistant", "user"] * 3
            continue
        assert [m["role"] for m in turns] == ["assistant", "tool", "assistant", "user", "assistant", "tool"]
        assert turns[0]["content"] == "Let me look." and turns[0]["tool_calls"][0]["id"] == f"m-{3 * number + 1}"
        # The tools the model was given (under agentbench-fc, that protocol's schemas).
        assert json.loads(row["tools"]) == tools_sent
    if protocol == "agentbench-fc":  # no worked example under another release's tool names
        assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]


def test_truncated_traces_are_flagged_and_full_text_keeps_everything(tmp_path: Path) -> None:
    capped = _random_run(tmp_path / "capped", env_options={"trace_max_chars": 40})
    result = export_run(capped, tmp_path / "capped.jsonl")
    rows = _read_jsonl(tmp_path / "capped.jsonl")
    assert result.truncated == result.rows == 3 and all(r["text_truncated"] for r in rows)
    assert "more characters not recorded]" in rows[0]["prompt"][-1]["content"]

    full = _random_run(tmp_path / "full", full_text=True)
    result = export_run(full, tmp_path / "full.jsonl")
    rows = _read_jsonl(tmp_path / "full.jsonl")
    assert result.truncated == 0 and not any(r["text_truncated"] for r in rows)
    with gym.make("AgentUnit/DB-v0", backend="sqlite") as env:
        prompt, _ = env.reset(options={"task_id": rows[0]["task_id"]})
    assert rows[0]["prompt"][-1]["content"] == prompt and len(prompt) > 40
    assert all(t is not None and t.max_chars is None for _, t in iter_records(full))


def test_write_rows_refuses_parquet_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install "agentunit-gym\[export\]"'):
        write_rows([{"a": 1}], tmp_path / "x.parquet")
    with pytest.raises(ConfigError, match="not a finished run"):
        export_run(tmp_path, tmp_path / "x.jsonl")


def test_cli_exports_and_warns_about_truncation(tmp_path: Path) -> None:
    capped = _random_run(tmp_path, env_options={"trace_max_chars": 40})
    done = cli("export", str(capped), "--output", str(tmp_path / "rows.jsonl"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 episode(s) written" in done.stdout
    assert "3 of 3 episode(s) have text cut" in done.stderr and "--full-text" in done.stderr
    assert len(_read_jsonl(tmp_path / "rows.jsonl")) == 3
    missing = cli("export", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.jsonl"), cwd=tmp_path)
    assert missing.returncode == 2 and "no episodes.jsonl" in missing.stderr


def test_the_trace_keeps_the_resets_split() -> None:
    from agentunit_gym.wrappers.trace import new_trace

    def trace(info: dict[str, Any]) -> Any:
        return new_trace("Task", info, episode_id="e", env_id="AgentUnit/DB-v0", domain="db", backend="sqlite",
                         task_id="t", seed=0, max_chars=None)

    assert trace({"split": "train"}).split == "train" and trace({"split": "dev"}).split == "dev"
    assert trace({"split": ""}).split == "" and trace({}).split == ""  # a task file without splits
    assert "split" not in trace({"split": "train"}).metadata  # a field of its own, not metadata


def test_cli_full_text_run_exports_without_a_warning(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "--agent", "random", "-n", "2", "--full-text",
               "--output", str(run), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "config.json").read_text())["full_text"] is True
    assert all(t is not None and t.max_chars is None for _, t in iter_records(run))
    exported = cli("export", str(run), "-o", str(tmp_path / "rows.parquet"), "--format", "jsonl", cwd=tmp_path)
    assert exported.returncode == 0 and "text cut" not in exported.stderr
    assert len(_read_jsonl(tmp_path / "rows.parquet")) == 2  # --format wins over the suffix
