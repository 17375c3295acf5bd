"""The trainers' adapters take the evaluator's protocol switch (``protocol=``) and play its episodes:
AgentBench's endings and turn limit, AgentBench FC's tool names, as ``make_eval_env(protocol=...)``."""

from __future__ import annotations

import json

import pytest

import agentunit_gym
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import ConfigError

TASK = "db-weather-03"
MUMBLE = "I am not sure what to do."


def test_skyrl_env_config_protocol_ends_where_agentbench_ends() -> None:
    pytest.importorskip("skyrl_gym")
    from agentunit_gym.integrations.skyrl import AgentUnitTextEnv

    extras = {"extra_info": {"task_id": TASK, "seed": 3}}
    under = AgentUnitTextEnv("AgentUnit/DB-v0", {"backend": "sqlite", "protocol": "agentbench"}, extras)
    plain = AgentUnitTextEnv("AgentUnit/DB-v0", {"backend": "sqlite"}, extras)
    try:
        under.init([])
        plain.init([])
        ended, going = under.step(MUMBLE), plain.step(MUMBLE)
    finally:
        under.close()
        plain.close()
    assert ended["done"] and ended["metadata"]["finish_reason"] == FinishReason.INVALID_FORMAT.value
    assert not going["done"]
    with pytest.raises(ConfigError, match="unknown protocol"):
        AgentUnitTextEnv("AgentUnit/DB-v0", {"backend": "sqlite", "protocol": "agentbnech"}, extras)


def test_verifiers_taskset_protocol_makes_the_protocols_env() -> None:
    pytest.importorskip("verifiers")
    from agentunit_gym.integrations.verifiers import AgentUnitTasksetConfig, make_agentunit_env

    config = AgentUnitTasksetConfig(env="DB-v0", backend="sqlite", protocol="agentbench-fc")
    env = make_agentunit_env(config)
    try:
        _, info = env.reset(seed=0, options={"task_id": TASK})
        assert [t["function"]["name"] for t in info["tools"]] == ["execute_sql", "commit_final_answer"]
        *_, terminated, _, info = env.step(json.dumps({"name": "commit_final_answer",
                                                        "arguments": {"answers": ["-3.2"]}}))
        assert terminated and info["score"]["success"] is True
    finally:
        env.close()


def test_inspect_suite_protocol_is_the_evaluators() -> None:
    from agentunit_gym.integrations.suite import resolve_suite

    suite = resolve_suite("DB-v0", backend="sqlite", task_ids=[TASK], protocol="agentbench")
    assert suite.options["protocol"] == "agentbench" and suite.options["invalid_policy"] == "terminate"
    env = suite.make_env()
    reference = agentunit_gym.make_eval_env("AgentUnit/DB-v0", protocol="agentbench", backend="sqlite",
                                            action_format="tools")
    try:
        for made in (env, reference):
            _, info = made.reset(seed=0, options={"task_id": TASK})
            assert info["step_limit"] == 15 and info["invalid_policy"] == "terminate"
            *_, terminated, _, info = made.step('{"name": "launch", "arguments": {}}')
            assert terminated and info["finish_reason"] is FinishReason.INVALID_ACTION
    finally:
        env.close()
        reference.close()
