"""``AgentUnit/WebShop-v0``: AgentBench's grammar, JSON tools, invalid actions, reward and finish reasons."""

from __future__ import annotations

import json
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from agentunit_gym.backends.shop.engine import EmbeddedShopBackend
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.domains.webshop.env import WebShopEnv
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import ConfigError


@pytest.fixture
def env(shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask]) -> Iterator[WebShopEnv]:
    e = WebShopEnv(tasks=small_goals, shop_backend=shop_backend)
    yield e
    e.close()


def react(action: str, thought: str = "I think so.") -> str:
    return f"Thought:\n{thought}\n\nAction:\n{action}"


def test_reset_shows_the_search_page_and_available_actions(env: WebShopEnv, small_goals: list[WebShopTask]) -> None:
    task = small_goals[0]
    obs, info = env.reset(options={"task_id": task.id})
    assert f"The initial observation:\nWebShop [SEP] Instruction: [SEP] {task.instruction} [SEP] Search" in obs
    assert obs.endswith('Available Actions:\n{"has_search_bar": true, "clickables": ["search"]}')
    assert info["domain"] == "webshop" and info["max_steps"] == task.max_steps
    assert {t["function"]["name"] for t in info["tools"]} == {"search", "click", "buy_now"}


def test_oracle_replay_in_react_and_json_earns_one(env: WebShopEnv, small_goals: list[WebShopTask]) -> None:
    for form in ("react", "json"):
        for task in small_goals[:6]:
            env.reset(options={"task_id": task.id})
            for step in task.reference_solution:
                obs, reward, terminated, truncated, info = env.step(env.render_action(step, form))
            assert terminated and not truncated
            assert reward == 1.0 and info["finish_reason"] is FinishReason.COMPLETE
            parts = info["score"]["components"]
            assert info["score"]["success"] is True
            assert parts["r_type"] == 1.0 and parts["r_att"] == 1.0 and parts["r_price"] is True
            assert parts["asin"] == parts["target_asin"] == task.asin
            assert json.loads(str(parts["options"])) == task.goal_options


def test_agentbench_action_regex(env: WebShopEnv) -> None:
    assert env.parse_action("Thought:\nI think ...\n\nAction:\nsearch[red shirt]").arguments == {
        "keywords": "red shirt"}
    assert env.parse_action("action: click[< Prev]").arguments == {"value": "< Prev"}
    # The brackets end at the first ']' (AgentBench's non-greedy match).
    assert env.parse_action("Action: search[a] and b]").arguments == {"keywords": "a"}
    assert env.parse_action("Thought: hmm").reason is FinishReason.INVALID_FORMAT  # type: ignore[union-attr]
    unknown = env.parse_action("Action: buy[it]")
    assert unknown.reason is FinishReason.INVALID_ACTION  # type: ignore[union-attr]


def test_agentbench_tool_names_are_accepted(env: WebShopEnv, small_goals: list[WebShopTask]) -> None:
    env.reset(options={"task_id": small_goals[0].id})
    action = env.parse_action('{"name": "search_action", "arguments": {"query": "red shirt"}}')
    assert action.tool == "search" and action.arguments == {"keywords": "red shirt"}  # type: ignore[union-attr]
    assert env.parse_action('{"name": "click_action", "arguments": "{\\"item\\": \\"x\\"}"}').tool == "click"  # type: ignore[union-attr]


def test_invalid_clicks_are_invalid_actions_listing_clickables(env: WebShopEnv,
                                                                        small_goals: list[WebShopTask]) -> None:
    env.reset(options={"task_id": small_goals[0].id})
    obs, reward, terminated, truncated, info = env.step(react("click[B0NOTHERE1]"))
    assert info["action_error"]["reason"] == "invalid_action" and info["action_error"]["issue"] == "not_allowed"
    assert '"clickables": ["search"]' in obs and not terminated
    obs, *_, info = env.step(react("search[cotton t-shirt]"))
    assert "Page 1 (Total results: 50)" in obs and info["execution_error"] is False
    obs, *_, info = env.step(react("click[B0NOTHERE1]"))
    assert info["action_error"]["issue"] == "not_allowed" and "is not clickable on this page" in obs
    assert '"has_search_bar": false' in obs and '"back to search"' in obs
    obs, *_, info = env.step('{"name": "click", "arguments": {"value": "Buy Now"}}')
    assert info["action_error"]["issue"] == "not_allowed"  # Buy Now is on item pages only
    obs, *_, info = env.step('{"name": "buy_now", "arguments": {}}')
    assert info["action_error"]["issue"] == "not_allowed"


def test_terminate_policy_ends_on_invalid_format(shop_backend: EmbeddedShopBackend,
                                                 small_goals: list[WebShopTask]) -> None:
    with WebShopEnv(tasks=small_goals, shop_backend=shop_backend, invalid_action="terminate") as env:
        env.reset(options={"task_id": small_goals[0].id})
        _, reward, terminated, _, info = env.step("I would like to buy a shirt.")
        assert terminated and reward == 0.0 and info["finish_reason"] is FinishReason.INVALID_FORMAT
        assert info["score"]["components"]["purchased"] is False


def test_step_limit_is_tle_with_zero_reward(shop_backend: EmbeddedShopBackend,
                                            small_goals: list[WebShopTask]) -> None:
    with WebShopEnv(tasks=small_goals, shop_backend=shop_backend, max_steps=2) as env:
        env.reset(options={"task_id": small_goals[0].id})
        env.step(react("search[shirt]"))
        _, reward, terminated, truncated, info = env.step(react("click[Next >]"))
        assert truncated and not terminated and reward == 0.0
        assert info["finish_reason"] is FinishReason.TASK_LIMIT


def test_wrong_purchase_is_partial_credit_not_success(env: WebShopEnv, small_goals: list[WebShopTask]) -> None:
    task = next(t for t in small_goals if len(t.goal_options) >= 1)
    env.reset(options={"task_id": task.id})
    for step in task.reference_solution:
        if step.tool == "click" and str(step.arguments) in task.goal_options.values():
            continue  # skip choosing the options
        _, reward, terminated, _, info = env.step(env.render_action(step))
    assert terminated and 0.0 < reward < 1.0
    assert info["score"]["success"] is False
    assert info["score"]["components"]["num_option_matches"] < len(task.goal_options)


def test_registered_env_passes_check_env_and_runs_the_bundled_suite_ids() -> None:
    import agentunit_gym  # noqa: F401 - registers the ids

    env = gym.make("AgentUnit/WebShop-v0", catalog_size=3000, catalog_seed=11)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        assert len(env.unwrapped.tasks) >= 500  # type: ignore[attr-defined]
    finally:
        env.close()


def test_agentbench_protocol_goes_on_after_a_refused_click_and_ends_on_no_action(
        shop_backend: EmbeddedShopBackend, small_goals: list[WebShopTask]) -> None:
    # What `eval --protocol agentbench` gives a WebShop env, from the domain's preset.
    from agentunit_gym.eval.plan.config import EvalConfig
    from agentunit_gym.eval.plan.routing import default_env_factory
    from agentunit_gym.eval.run.runner import env_options
    from agentunit_gym.wrappers.protocols import protocol_setup

    setup = protocol_setup("AgentUnit/WebShop-v0", "agentbench")
    assert setup.env_options["invalid_move"] == "same_page"
    assert setup.ending_issues == frozenset({"no_call", "malformed", "unknown_tool"})
    config = EvalConfig(envs=("WebShop-v0",), agent="oracle", protocol="agentbench", invalid_action="terminate")
    options = env_options(config, "AgentUnit/WebShop-v0")
    options.update(backend="embedded", tasks=small_goals, shop_backend=shop_backend)
    env = default_env_factory("AgentUnit/WebShop-v0", options)
    try:
        first, _ = env.reset(options={"task_id": small_goals[0].id})
        page = first.split("The initial observation:\n", 1)[1]
        obs, _, terminated, truncated, info = env.step(react("click[B0NOTHERE1]"))
        assert not (terminated or truncated) and info["reply_class"] == "invalid_action"
        assert obs == f"Observation:\n{page}"  # WebShop performs nothing: the same page again
        obs, _, terminated, _, info = env.step(react("search[cotton t-shirt]"))
        assert not terminated and "Page 1 (Total results: 50)" in obs
        obs, _, terminated, _, info = env.step(react("click[Nothing Here]"))
        assert not terminated and info["invalid_count"] == 2
        _, reward, terminated, _, info = env.step("I would like to buy a shirt.")  # no action at all
        assert terminated and reward == 0.0 and info["finish_reason"] is FinishReason.INVALID_FORMAT
    finally:
        env.close()


def test_invalid_move_option_is_checked(shop_backend: EmbeddedShopBackend) -> None:
    with pytest.raises(ConfigError, match="invalid_move must be 'feedback' or 'same_page'"):
        WebShopEnv(shop_backend=shop_backend, invalid_move="ignore")


def test_agentbench_fc_protocol_never_ends_on_an_invalid_reply() -> None:
    # AgentBench's function-calling WebShop loop answers a reply without a tool call and goes on.
    from agentunit_gym.wrappers.protocols import protocol_setup

    setup = protocol_setup("AgentUnit/WebShop-v0", "agentbench-fc")
    assert setup.ending_issues == frozenset() and setup.env_options["invalid_move"] == "same_page"
