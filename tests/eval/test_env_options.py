"""``--env-option [ENV:]KEY=VALUE``: parsing, routing to the envs that take the key, and the env kwargs a run passes."""

from __future__ import annotations

import pytest

from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.env_options import parse_env_option, resolve_env_options
from agentunit_gym.eval.run.runner import env_options
from agentunit_gym.wrappers.protocols import protocol_setup

KG, SHOP, DB = "AgentUnit/KG-v0", "AgentUnit/WebShop-v0", "AgentUnit/DB-v0"


@pytest.mark.parametrize(("text", "parsed"), [
    ("endpoint=http://127.0.0.1:7878/query", (None, "endpoint", "http://127.0.0.1:7878/query")),
    ("KG-v0:endpoint=http://h:8890/sparql", ("KG-v0", "endpoint", "http://h:8890/sparql")),
    ("AgentUnit/KG-v0:max_results=500", ("AgentUnit/KG-v0", "max_results", 500)),
    ("query_timeout=2.5", (None, "query_timeout", 2.5)),
    ("flag=true", (None, "flag", True)),
    ('label="007"', (None, "label", "007")),  # JSON text stays text
    ("label=007", (None, "label", "007")),  # not JSON (a leading zero): the text itself
    ("path=", (None, "path", "")),
])
def test_parse_reads_json_when_it_parses(text: str, parsed: tuple[object, ...]) -> None:
    assert parse_env_option(text) == parsed


@pytest.mark.parametrize("text", ["endpoint", "=x", "KG-v0:=x", ":a=1", "two words=1"])
def test_parse_refuses_malformed_options(text: str) -> None:
    with pytest.raises(ConfigError, match=r"expected \[ENV:\]KEY=VALUE"):
        parse_env_option(text)


def test_an_unscoped_option_goes_to_the_envs_that_name_it() -> None:
    resolved = resolve_env_options(["endpoint=http://h/sparql", "url=http://shop:3000", "max_steps=4"],
                                   [KG, SHOP, DB])
    assert resolved == {KG: {"endpoint": "http://h/sparql", "max_steps": 4},
                        SHOP: {"url": "http://shop:3000", "max_steps": 4}, DB: {"max_steps": 4}}


def test_a_scoped_option_goes_to_its_env_only_and_a_later_one_wins() -> None:
    resolved = resolve_env_options(["WebShop-v0:catalog_size=3000", "WebShop-v0:catalog_size=4000",
                                    "WebShop-v0:start_timeout=30"], [KG, SHOP])
    assert resolved == {SHOP: {"catalog_size": 4000, "start_timeout": 30}}  # **backend_options takes any key


def test_options_no_env_takes_are_refused_with_what_they_take() -> None:
    with pytest.raises(ConfigError, match="no env of this run names an option 'endpointt'") as caught:
        resolve_env_options(["endpointt=http://h"], [KG])
    assert "endpoint" in str(caught.value) and "ENV:KEY=VALUE" in str(caught.value)
    with pytest.raises(ConfigError, match="AgentUnit/KG-v0 takes no option 'url'"):
        resolve_env_options(["KG-v0:url=http://h"], [KG])  # the KG env passes nothing on
    with pytest.raises(ConfigError, match="OS-v0 is not an env of this run"):
        resolve_env_options(["OS-v0:backend=local"], [KG])


def test_a_run_passes_them_as_env_kwargs_over_the_protocol_preset() -> None:
    config = EvalConfig(envs=(KG, SHOP), agent="oracle", protocol="agentbench", invalid_action="terminate",
                        env_options_by_env={KG: {"endpoint": "http://h/sparql", "max_steps": 9},
                                            SHOP: {"invalid_move": "feedback"}})
    kg = env_options(config, KG)
    assert kg["protocol"] == "agentbench" and kg["invalid_policy"] == "terminate"
    # make_eval_env puts the protocol's options under the run's own (protocol_setup, one place).
    kg = protocol_setup(KG, "agentbench").options_under(kg)
    assert kg["endpoint"] == "http://h/sparql" and kg["max_steps"] == 9  # over AgentBench's 15
    shop = protocol_setup(SHOP, "agentbench").options_under(env_options(config, SHOP))
    assert shop["invalid_move"] == "feedback" and "endpoint" not in shop and shop["max_steps"] == 10
    assert "env_options_by_env" in config.resume_key()
