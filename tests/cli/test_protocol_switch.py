"""One protocol switch: ``eval --protocol P`` and ``make_eval_env(protocol=P)`` play the same episode.

The same seeded task and the same scripted replies, once through the CLI as a user runs it and
once through ``make_eval_env`` in this process: the observations the agent read and the ending
must be equal, and must be the protocol's (AgentBench's endings, turn limit and tool names), not
the default's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentunit_gym
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.registry import get_domain
from agentunit_gym.eval.record.records import load_trace, read_records
from tests.cli.clitools import cli

TASK = "db-weather-03"
QUERY = "Action: Operation\n```sql\nSELECT MIN(temp_min) FROM seattle_weather\n```"
SQL_CALL = json.dumps({"name": "execute_sql", "arguments": {"query": "SELECT MIN(temp_min) FROM seattle_weather"}})
COMMIT_FC = json.dumps({"name": "commit_final_answer", "arguments": {"answers": ["-3.2"]}})

SCRIPTS = {
    # AgentBench's DB loop ends the episode on the first reply it cannot parse.
    "agentbench": [QUERY, "I am not sure what to do.", QUERY],
    # AgentBench FC answers a reply without a tool call and goes on; its names reach the env's tools.
    "agentbench-fc": ["Let me think first.", SQL_CALL, COMMIT_FC],
}
ENDINGS = {"agentbench": (FinishReason.INVALID_FORMAT, 2, 0.0), "agentbench-fc": (FinishReason.COMPLETE, 3, 1.0)}


def _agent_module(replies: list[str]) -> str:
    return ("REPLIES = " + json.dumps(replies) + "\n\n"
            "class Agent:\n"
            "    def reset(self, info):\n"
            "        self.turn = 0\n"
            "    def act(self, observation, info):\n"
            "        self.turn += 1\n"
            "        return REPLIES[self.turn - 1]\n")


@pytest.mark.parametrize("protocol", sorted(SCRIPTS))
def test_the_cli_and_make_eval_env_play_the_same_episode_under_a_protocol(protocol: str, tmp_path: Path) -> None:
    replies = SCRIPTS[protocol]
    (tmp_path / "scripted.py").write_text(_agent_module(replies))
    out = tmp_path / "run"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "--task-id", TASK, "--seed", "7",
               "--agent", "scripted:Agent", "--protocol", protocol, "--full-text", "--quiet",
               "--output", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = read_records(out / "episodes.jsonl")
    trace = load_trace(out, record)
    assert trace is not None and record.seed is not None
    cli_seen = [trace.prompt, *(step.observation for step in trace.steps)]

    env = agentunit_gym.make_eval_env("AgentUnit/DB-v0", protocol=protocol, backend="sqlite", trace_max_chars=None)
    try:
        observation, first = env.reset(seed=record.seed, options={"task_id": TASK})
        seen, ended = [observation], False
        for reply in replies:
            observation, reward, terminated, truncated, info = env.step(reply)
            seen.append(observation)
            if terminated or truncated:
                ended = True
                break
    finally:
        env.close()

    assert ended and seen == cli_seen
    reason, steps, expected_reward = ENDINGS[protocol]
    assert info["finish_reason"] is reason and len(seen) - 1 == steps == record.steps
    assert record.finish_reason == reason.value == trace.finish_reason
    assert float(reward) == expected_reward == record.reward
    assert first["step_limit"] == trace.max_steps == get_domain("db").step_limit  # AgentBench's limit, both ways
    assert first["invalid_policy"] == "terminate"


def test_the_default_protocol_goes_on_where_agentbench_ends() -> None:
    # The control: the same replies under the default protocol do not end at the invalid one.
    env = agentunit_gym.make_eval_env("AgentUnit/DB-v0", backend="sqlite")
    try:
        _, first = env.reset(seed=7, options={"task_id": TASK})
        env.step(QUERY)
        _, _, terminated, truncated, info = env.step("I am not sure what to do.")
        assert not (terminated or truncated) and first["invalid_policy"] == "continue"
        assert info["reply_class"] == "invalid_format"
    finally:
        env.close()
