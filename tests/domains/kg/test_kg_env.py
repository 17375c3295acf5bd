"""KG env on a small hand-written graph: AgentBench's tool semantics, texts, grammar and scoring."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.core import FinishReason
from agentunit_gym.domains.kg.env import KGEnv
from agentunit_gym.domains.kg.scoring import answer_scores
from agentunit_gym.domains.kg.task import KGTask

TASK = KGTask.model_validate({
    "id": "small-1",
    "question": "Which countries border both Aland and Bland?",
    "entities": {"Aland": "m.country_a", "Bland": "m.country_b"},
    "actions": ["get_relations(m.country_a)", "get_neighbors(m.country_a,location.country.adjoins)",
                "get_relations(m.country_b)", "get_neighbors(m.country_b,location.country.adjoins)",
                "intersection(#0,#1)"],
    "answer": ["m.country_c"],
})


@pytest.fixture
def env(small_store: EmbeddedSPARQL) -> Iterator[KGEnv]:
    e = KGEnv(sparql_backend=small_store, tasks=[TASK])
    e.reset(options={"task_id": "small-1"})
    yield e
    e.close()


def act(env: KGEnv, text: str) -> tuple[str, dict[str, Any]]:
    observation, _, _, _, info = env.step(text)
    return observation, info


def test_get_relations_lists_relations_only_sorted(env: KGEnv) -> None:
    obs, info = act(env, "Thought: look at Aland.\nAction: get_relations(Aland)")
    assert obs == ("Observation: [location.country.adjoins, location.country.capital, location.country.cities, "
                   "location.country.continent, location.country.currency_used]")
    assert info["execution"] == {"tool": "get_relations", "listed": 5}
    # The entity id works as well as the name; attributes and names are not relations.
    obs, _ = act(env, "Action: get_relations(m.country_d)")
    assert obs == "Observation: [location.country.adjoins, location.country.continent, location.country.currency_used]"


def test_variables_are_numbered_and_typed(env: KGEnv) -> None:
    act(env, "Action: get_relations(Aland)")
    obs, info = act(env, "Action: get_neighbors(Aland, location.country.adjoins)")
    assert obs == "Observation: variable #0, which are instances of location.country"
    assert info["execution"]["program"] == "(JOIN (R location.country.adjoins) m.country_a)"
    act(env, "Action: get_relations(#0)")
    obs, _ = act(env, "Action: get_neighbors(#0, location.country.currency_used)")
    assert obs == "Observation: variable #1, which are instances of finance.currency"
    obs, _ = act(env, "Action: count(#1)")
    assert obs == "Observation: variable #2, which is a number"


def test_neighbors_needs_the_relation_listed_for_that_argument(env: KGEnv) -> None:
    obs, info = act(env, "Action: get_neighbors(Aland, location.country.adjoins)")
    assert obs == ("get_neighbors(Aland, location.country.adjoins) cannot be executed. "
                   "You may make a mistake and need to fix it.")
    assert info["execution"]["issue"] == "relation_not_listed" and info["execution_error"] is True
    act(env, "Action: get_relations(Bland)")  # listing another entity does not help
    obs, _ = act(env, "Action: get_neighbors(Aland, location.country.adjoins)")
    assert obs.endswith("cannot be executed. You may make a mistake and need to fix it.")


def test_intersection_needs_the_same_type(env: KGEnv) -> None:
    act(env, "Action: get_relations(Aland)")
    act(env, "Action: get_neighbors(Aland, location.country.adjoins)")
    act(env, "Action: get_neighbors(Aland, location.country.currency_used)")
    obs, info = act(env, "Action: intersection(#0, #1)")
    assert obs == ("intersection(#0, #1) cannot be executed. The two variables are not of the same type. "
                   "You may further explore them by call get_relations")
    assert info["execution"]["issue"] == "type_mismatch"


def _commit(env: KGEnv, steps: list[str]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for step in steps:
        _, info = act(env, step)
    assert info["finish_reason"] is FinishReason.COMPLETE
    return dict(info["score"])


def test_oracle_path_scores_one_and_topic_entities_are_left_out(env: KGEnv) -> None:
    score = _commit(env, [
        "Action: get_relations(Aland)", "Action: get_neighbors(Aland, location.country.adjoins)",
        "Action: get_relations(Bland)", "Action: get_neighbors(Bland, location.country.adjoins)",
        "Action: intersection(#0, #1)", "Final Answer: #2"])
    assert score["reward"] == 1.0 and score["success"] is True
    assert score["components"]["f1"] == 1.0 and score["components"]["exact_match"] is True
    assert score["components"]["executability"] == 1
    assert json.loads(score["components"]["answer"]) == ["m.country_c"]


def test_neighbours_of_neighbours_leave_out_the_start(env: KGEnv) -> None:
    # b and c both adjoin a; a's neighbours' neighbours are a, b, c, d: AgentBench drops a, the topic entity.
    score = _commit(env, ["Action: get_relations(Aland)", "Action: get_neighbors(Aland, location.country.adjoins)",
                          "Action: get_relations(#0)", "Action: get_neighbors(#0, location.country.adjoins)",
                          "Final Answer: #1"])
    assert json.loads(score["components"]["answer"]) == ["m.country_b", "m.country_c", "m.country_d"]
    assert score["components"]["precision"] == pytest.approx(1 / 3) and score["reward"] == pytest.approx(0.5)


def test_argmax_keeps_ties_and_argmin_needs_get_attributes(env: KGEnv) -> None:
    act(env, "Action: get_relations(Xland)")
    env.unwrapped.session.entities["Xland"] = "m.cont_x"  # not a topic entity of this task: add it
    act(env, "Action: get_relations(Xland)")
    act(env, "Action: get_neighbors(Xland, location.continent.countries)")
    obs, info = act(env, "Action: argmin(#0, location.country.area)")
    assert info["execution"]["issue"] == "attribute_not_listed"
    obs, _ = act(env, "Action: get_attributes(#0)")
    assert obs == "Observation: [location.country.area, location.country.population]"
    obs, _ = act(env, "Action: argmax(#0, location.country.population)")
    assert obs == "Observation: variable #1, which are instances of location.country"
    score = _commit(env, ["Final Answer: #1"])
    assert json.loads(score["components"]["answer"]) == ["m.country_b", "m.country_c"]


def test_argmin_and_count_answers(small_store: EmbeddedSPARQL) -> None:
    with KGEnv(sparql_backend=small_store, tasks=[TASK]) as env:
        env.reset(options={"task": TASK.model_copy(update={"entities": {"Xland": "m.cont_x"},
                                                           "answer": ("m.country_c",)})})
        score = _commit(env, ["Action: get_relations(Xland)",
                              "Action: get_neighbors(Xland, location.continent.countries)",
                              "Action: get_attributes(#0)", "Action: argmin(#0, location.country.area)",
                              "Final Answer: #1"])
        assert score["reward"] == 1.0
        env.reset(options={"task": TASK.model_copy(update={"entities": {"Xland": "m.cont_x"}, "answer": ("4",)})})
        score = _commit(env, ["Action: get_relations(Xland)",
                              "Action: get_neighbors(Xland, location.continent.countries)",
                              "Action: count(#0)", "Final Answer: #1"])
        assert score["reward"] == 1.0 and json.loads(score["components"]["answer"]) == ["4"]


def test_agentbench_reply_handling(env: KGEnv) -> None:
    # Text after "Observation:" is the agent's hallucination and is dropped; \_ reads as _.
    obs, info = act(env, "Action: get\\_relations(Aland)\nObservation: [made.up]")
    assert obs.startswith("Observation: [location.country.adjoins")
    obs, info = act(env, "I think I should look around.")
    assert obs == "No executable function found! Need to recheck the action."
    assert info["action_error"]["reason"] == "invalid_format" and info["action_error"]["issue"] == "no_call"
    obs, info = act(env, "Action: look around")
    assert obs == "Function is not executed!"
    obs, info = act(env, "Action: search(Aland)")
    assert obs == ("I may make a syntax error when calling search (e.g., unmatched parenthesis). "
                   "I need to fix it and reuse the tool")
    assert info["action_error"]["issue"] == "unknown_tool"
    obs, info = act(env, "Action: get_neighbors(Aland)")
    assert obs == "get_neighbors(Aland) cannot be executed. You may make a mistake and need to fix it."
    obs, info = act(env, "Final Answer: #7")
    assert obs == "Invalid variable id! Need to recheck the action."
    assert info["finish_reason"] == "" and info["action_error"]["reason"] == "invalid_action"


def test_json_tool_calls(env: KGEnv) -> None:
    obs, info = act(env, json.dumps({"name": "get_relations", "arguments": {"variable": "m.country_a"}}))
    assert obs.startswith("Observation: [location.country.adjoins") and info["action"]["form"] == "json"
    obs, _ = act(env, json.dumps({"name": "get_neighbors",
                                  "arguments": {"variable": "Aland", "relation": "location.country.adjoins"}}))
    assert obs == "Observation: variable #0, which are instances of location.country"
    _, info = act(env, json.dumps({"name": "final_answer", "arguments": {"variable": "0"}}))
    assert info["finish_reason"] is FinishReason.COMPLETE
    assert info["score"]["components"]["n_predicted"] == 2  # b and c


def test_not_committing_scores_zero_and_the_turn_limit_is_fifteen(env: KGEnv) -> None:
    info: dict[str, Any] = {}
    for _ in range(15):
        _, _, terminated, truncated, info = env.step("Action: get_relations(Aland)")
    assert truncated and not terminated and info["finish_reason"] is FinishReason.TASK_LIMIT
    assert info["score"]["reward"] == 0.0
    assert info["score"]["components"]["executability"] == 0 and info["score"]["components"]["f1"] == 0.0


def test_empty_committed_answer_is_not_executable(env: KGEnv) -> None:
    score = _commit(env, ["Action: get_relations(Aland)", "Action: get_neighbors(Aland, location.country.capital)",
                          "Action: get_relations(#0)", "Action: get_neighbors(#0, location.citytown.country)",
                          "Action: get_relations(m.country_d)",
                          "Action: get_neighbors(m.country_d, location.country.adjoins)",
                          "Action: intersection(#1, #2)", "Final Answer: #3"])
    # #1 = {a} (the capital's country) less the topic entity a: empty; #2 = {c}; nothing in both.
    assert score["components"]["executability"] == 0 and score["reward"] == 0.0


@pytest.mark.parametrize(("predicted", "gold", "f1", "em"), [
    (["a"], ["a"], 1.0, True),
    (["a", "b"], ["a"], 2 / 3, False),
    (["a"], ["a", "b", "c", "d"], 0.4, False),
    (["x"], ["a"], 0.0, False),
    ([], ["a"], 0.0, False),
    (["a", "a"], ["a"], 1.0, True),
])
def test_answer_scores(predicted: list[str], gold: list[str], f1: float, em: bool) -> None:
    scores = answer_scores(predicted, gold)
    assert scores["f1"] == pytest.approx(f1) and scores["exact_match"] is em


def test_the_worked_example_is_true_on_the_bundled_graph() -> None:
    # The prompt's one-shot example runs on the bundled graph: every observation it shows is the env's.
    from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL as Store
    from agentunit_gym.domains.kg.prompt import EXAMPLE, EXAMPLE_ENTITIES, PROMPT
    from agentunit_gym.domains.kg.store import bundled_store

    task = KGTask.model_validate({"id": "example", "question": "Which countries border both France and Germany?",
                                  "entities": EXAMPLE_ENTITIES, "actions": ["count(m.country_fr)"],
                                  "answer": ["m.country_be", "m.country_ch", "m.country_lu"]})
    with Store(bundled_store()) as store, KGEnv(sparql_backend=store, tasks=[task]) as env:
        env.reset(options={"task_id": "example"})
        for (_, reply), (following, _) in zip(EXAMPLE, EXAMPLE[1:], strict=False):
            observation, *_ = env.step(reply)
            assert observation == following
        _, reward, terminated, _, _ = env.step(EXAMPLE[-1][1])
        assert terminated and reward == 1.0
    assert [s.tool for s in PROMPT.example] == ["get_relations", "get_neighbors", "get_relations", "get_neighbors",
                                                "intersection", "final_answer"]


def test_agentbench_protocol_answers_every_invalid_reply_and_goes_on(small_store: EmbeddedSPARQL) -> None:
    # AgentBench's KG loop never ends an episode on an invalid reply: the options `eval --protocol
    # agentbench` gives a KG env (the domain's preset) keep it going to the turn limit.
    from agentunit_gym.eval.plan.config import EvalConfig
    from agentunit_gym.eval.plan.routing import default_env_factory
    from agentunit_gym.eval.run.runner import env_options
    from agentunit_gym.wrappers.protocols import protocol_setup

    setup = protocol_setup("AgentUnit/KG-v0", "agentbench")
    assert setup.ending_issues == frozenset() and setup.env_options["max_steps"] == 15
    config = EvalConfig(envs=("KG-v0",), agent="oracle", protocol="agentbench", invalid_action="terminate")
    options = env_options(config, "AgentUnit/KG-v0")
    options.update(backend="embedded", tasks=[TASK], sparql_backend=small_store, max_steps=6)
    env = default_env_factory("AgentUnit/KG-v0", options)
    try:
        env.reset(options={"task_id": "small-1"})
        replies = ["I think I should look around.", "Action: search(Aland)", "Action: get_neighbors(Aland)",
                   "Final Answer: #7", "Action: get_relations(Aland)"]
        for reply in replies:
            obs, _, terminated, truncated, info = env.step(reply)
            assert not (terminated or truncated), (reply, info.get("finish_reason"))
        assert obs.startswith("Observation: [location.country.adjoins") and info["invalid_count"] == 4
        _, reward, _, truncated, info = env.step("No executable function here either.")
        assert truncated and reward == 0.0 and info["finish_reason"] is FinishReason.TASK_LIMIT
    finally:
        env.close()
