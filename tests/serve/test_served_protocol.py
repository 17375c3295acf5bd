"""The servers take the evaluator's protocol switch: ``serve --protocol`` and ``mcp --protocol``
play the episodes ``make_eval_env(protocol=...)`` plays (AgentBench's endings, limits, tool names)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import ConfigError
from agentunit_gym.serve.served_episodes import EpisodePool, EpisodeSettings
from agentunit_gym.wrappers.stack import make_protocol_env

TASK = "db-weather-03"
QUERY = {"query": "SELECT MIN(temp_min) FROM seattle_weather"}
FC_REPLIES = ["Let me think first.", json.dumps({"name": "execute_sql", "arguments": QUERY}),
              json.dumps({"name": "commit_final_answer", "arguments": {"answers": ["-3.2"]}})]


def _play(env: gym.Env[str, str], replies: list[str]) -> tuple[dict[str, Any], list[tuple[str, float, bool, bool]],
                                                               dict[str, Any]]:
    _, first = env.reset(seed=7, options={"task_id": TASK})
    steps = []
    for reply in replies:
        observation, reward, terminated, truncated, info = env.step(reply)
        steps.append((observation, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return first, steps, info


def test_the_env_server_under_a_protocol_plays_make_eval_envs_episode() -> None:
    pytest.importorskip("openenv")
    from agentunit_gym.serve.server import ServeConfig, start_server

    local = agentunit_gym.make_eval_env("AgentUnit/DB-v0", protocol="agentbench-fc", backend="sqlite")
    try:
        here_first, here, here_end = _play(local, FC_REPLIES)
    finally:
        local.close()
    config = ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0, protocol="agentbench-fc")
    with start_server(config) as running, gym.make("AgentUnit/Remote-v0", url=running.url) as remote:
        there_first, there, there_end = _play(remote, FC_REPLIES)
    assert there == here and len(here) == 3  # the reply without a call was answered, not the end
    assert [t["function"]["name"] for t in there_first["tools"]] == ["execute_sql", "commit_final_answer"]
    assert there_first["invalid_policy"] == here_first["invalid_policy"] == "terminate"
    assert there_end["finish_reason"] is here_end["finish_reason"] is FinishReason.COMPLETE
    assert here[-1][1] == 1.0


def test_the_env_server_without_a_protocol_serves_the_bare_env() -> None:
    with make_protocol_env("AgentUnit/DB-v0", None, backend="sqlite") as bare:
        assert isinstance(bare.unwrapped, gym.Env) and "invalid_policy" not in bare.reset(seed=0)[1]
    with pytest.raises(ConfigError, match="protocol 'agentbench'"):
        make_protocol_env("AgentUnit/DB-v0", None, agentbench_root="/nowhere", backend="sqlite")


def test_an_mcp_episode_under_agentbench_fc_shows_its_names_and_records_the_protocol(tmp_path: Path) -> None:
    pool = EpisodePool(EpisodeSettings("DB-v0", backend="sqlite", task_id=TASK, seed=7, output=tmp_path,
                                       protocol="agentbench-fc"))
    try:
        assert [t.name for t in pool.tools] == ["execute_sql", "commit_final_answer"]
        assert [t.commits for t in pool.tools] == [False, True]
        assert pool.tools[1].input_schema["properties"]["answers"]["type"] == "array"
        episode = pool.get("a")
        sql = episode.call("execute_sql", QUERY)
        done = episode.call("commit_final_answer", {"answers": ["-3.2"]})
    finally:
        pool.close()
    local = agentunit_gym.make_eval_env("AgentUnit/DB-v0", protocol="agentbench-fc", backend="sqlite")
    try:
        _, here, _ = _play(local, FC_REPLIES[1:])
    finally:
        local.close()
    assert sql.text == here[0][0] and not sql.is_error
    assert done.ended and done.result is not None and done.result["success"] is True
    assert done.result["finish_reason"] == "complete"
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["protocol"] == "agentbench-fc" and stored["invalid_action"] == "terminate"


@pytest.mark.parametrize(("protocol", "ends"), [("agentbench", True), ("agentunit", False)])
def test_an_mcp_episode_ends_on_an_unknown_tool_under_agentbench_only(protocol: str, ends: bool) -> None:
    pool = EpisodePool(EpisodeSettings("DB-v0", backend="sqlite", task_id=TASK, seed=7,
                                       protocol=protocol))  # type: ignore[arg-type]
    try:
        outcome = pool.get("a").call("launch", {})
    finally:
        pool.close()
    assert outcome.is_error and outcome.ended is ends
    if ends:
        assert outcome.result is not None and outcome.result["finish_reason"] == "invalid_action"


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_a_checkout_without_the_agentbench_protocol_is_refused_by_the_servers(command: str, tmp_path: Path) -> None:
    from tests.cli.clitools import cli

    done = cli(command, "--env", "DB-v0", "--backend", "sqlite", "--protocol", "agentbench-fc",
               "--agentbench-root", str(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert "--agentbench-root gives AgentBench's prompts to --protocol agentbench" in done.stderr
    assert "the protocol given: agentbench-fc" in done.stderr
