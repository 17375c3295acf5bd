"""``--protocol agentbench|agentbench-fc`` and ``--invalid-action``, run as a user would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentunit_gym.core.registry import get_domain
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.record.records import read_records
from agentunit_gym.wrappers.aliases import RenameTools
from tests.cli.clitools import cli

MUMBLER = "class Agent:\n    def act(self, observation, info):\n        return 'I am not sure what to do.'\n"
"""An agent whose every reply is neither ReAct nor a tool call (invalid format)."""


def test_agentbench_protocol_ends_on_an_invalid_reply_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "mumbler.py").write_text(MUMBLER)
    out = tmp_path / "ab"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "2", "--agent", "./mumbler.py:Agent",
               "--protocol", "agentbench", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "protocol: agentbench, invalid action: terminate" in done.stdout
    records = read_records(out / "episodes.jsonl")
    assert len(records) == 2
    assert all(r.finish_reason == "invalid_format" and r.steps == 1 for r in records)
    config = json.loads((out / "config.json").read_text())
    assert config["protocol"] == "agentbench" and config["invalid_action"] == "terminate"
    assert "protocol agentbench (invalid action: terminate)" in (out / "report.html").read_text()


def test_agentbench_turn_limit_and_continue_override(tmp_path: Path) -> None:
    (tmp_path / "mumbler.py").write_text(MUMBLER)
    out = tmp_path / "cont"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", "mumbler:Agent",
               "--protocol", "agentbench", "--invalid-action", "continue", "--quiet", "--output", str(out),
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = read_records(out / "episodes.jsonl")
    # Feedback and go on, up to AgentBench's turn limit of the domain (not the task's own).
    assert record.finish_reason == "task_limit" and record.steps == get_domain("db").step_limit
    assert json.loads((out / "config.json").read_text())["invalid_action"] == "continue"


def test_agentbench_fc_shows_agentbench_fc_tools_and_maps_their_calls(tmp_path: Path) -> None:
    def commit(body: dict[str, Any]) -> dict[str, Any]:
        call = {"id": "call_0", "type": "function",
                "function": {"name": "commit_final_answer", "arguments": json.dumps({"answers": ["x"]})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    out = tmp_path / "fc"
    with FakeChatServer(commit) as server:
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "2", "--agent", "openai:fc-model",
                   "--base-url", server.base_url, "--protocol", "agentbench-fc", "--quiet", "--output", str(out),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = [dict(a.schema) for a in get_domain("db").protocols["agentbench-fc"].tools]
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["execute_sql", "commit_final_answer"]
    assert json.loads(json.dumps(first["tools"])) == json.loads(json.dumps(expected, default=dict))
    assert first["tools"][1]["function"]["parameters"]["properties"]["answers"]["type"] == "array"
    # No worked example written with the env's own tool names: system, then the task.
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    records = read_records(out / "episodes.jsonl")
    # commit_final_answer reached the env's answer tool: a committed episode, not an unknown tool.
    assert len(records) == 2 and all(r.finish_reason == "complete" for r in records)


def test_os_fc_names_map_onto_the_os_tools() -> None:
    aliases = get_domain("os").protocols["agentbench-fc"].tools
    assert [a.name for a in aliases] == ["bash_action", "finish_action", "answer_action"]
    with RenameTools(gym.make("AgentUnit/DB-v0", backend="sqlite"), aliases) as env:
        assert json.loads(env.translate('{"name": "bash_action", "arguments": {"script": "ls /"}}')) == {
            "name": "bash", "arguments": {"script": "ls /"}}
        assert json.loads(env.translate('{"name": "finish_action", "arguments": {"thought": "done"}}')) == {
            "name": "finish", "arguments": {}}
        assert env.translate("Act: bash") == "Act: bash"  # text replies pass unchanged
        _, info = env.reset(seed=0)
        assert [t["function"]["name"] for t in info["tools"]] == ["bash_action", "finish_action", "answer_action"]


def test_agentbench_fc_answers_a_reply_without_a_tool_call_and_goes_on(tmp_path: Path) -> None:
    """AgentBench FC: a reply without a tool call is answered ("No executable tool calls found")
    and the loop goes on (it takes a turn); the prose, here valid ReAct SQL, is never run."""
    def replies(body: dict[str, Any]) -> dict[str, Any]:
        if sum(m["role"] == "assistant" for m in body["messages"]) == 0:
            # ReAct text that the DB's text parser would run: under FC it must not be.
            return {"role": "assistant", "content": "Think: drop it.\nAction: Operation\n```sql\nDELETE FROM t;\n```"}
        call = {"id": "call_1", "type": "function",
                "function": {"name": "commit_final_answer", "arguments": json.dumps({"answers": ["x"]})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    out = tmp_path / "fc"
    with FakeChatServer(replies) as server:
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", "openai:fc-model",
                   "--base-url", server.base_url, "--protocol", "agentbench-fc", "--quiet", "--output", str(out),
                   "--full-text", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = read_records(out / "episodes.jsonl")
    assert record.finish_reason == "complete" and record.steps == 2  # not ended as IF by the terminate policy
    assert server.requests[0]["tool_choice"] == "auto"  # said explicitly: some servers ignore tools without it
    task = server.requests[0]["messages"][1]["content"]
    assert "Action:" not in task and "```sql" not in task and "Final Answer" not in task  # no text grammar
    system = server.requests[0]["messages"][0]["content"]
    assert "Act:" not in system and "Action:" not in system
    answer = server.requests[1]["messages"][-1]
    assert answer == {"role": "user", "content": "Invalid format: No executable tool calls found. Please call a "
                                                 "tool instead."}
    trace = json.loads(next((out / "traces").rglob("*.json")).read_text())
    first = trace["steps"][0]
    assert first["action_error"]["issue"] == "no_call" and first["action"] is None
    assert first["execution"] == {} and first["usage"]["finish_reason"] == "stop"


def test_the_oracle_writes_tool_calls_where_only_tool_calls_are_actions(tmp_path: Path) -> None:
    # Under agentbench-fc, and with the env option action_format=tools, the oracle's steps are
    # JSON calls (it used to write ReAct text there, answered "No executable tool calls found").
    for name, options in (("fc", ["--protocol", "agentbench-fc"]), ("option", ["--env-option", "action_format=tools"])):
        out = tmp_path / name
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "3", "--agent", "oracle", *options,
                   "--quiet", "--output", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        records = read_records(out / "episodes.jsonl")
        assert len(records) == 3 and all(r.finish_reason == "complete" and r.reward == 1.0 for r in records), name
