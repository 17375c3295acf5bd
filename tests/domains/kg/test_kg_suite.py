"""The bundled KG suite: shape, gold answers recomputed, oracle F1 = 1 and a wrong answer 0 on every
question, on the embedded store, on Oxigraph's HTTP server over the same store, and on the kg container."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sparql.base import SPARQLBackend
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.backends.sparql.http import HTTPSPARQL
from agentunit_gym.core import FinishReason
from agentunit_gym.domains.kg.domain import DOMAIN
from agentunit_gym.domains.kg.env import KGEnv
from agentunit_gym.domains.kg.store import bundled_store
from agentunit_gym.domains.kg.task import MAKES_VARIABLE, TOOL_PARAMS, KGTask, split_call
from tests.backends.oxigraph_server import OxigraphServer

SUITE: list[KGTask] = [t for t in DOMAIN.bundled_tasks() if isinstance(t, KGTask)]


def test_suite_shape() -> None:
    assert len(SUITE) >= 60
    assert len({t.id for t in SUITE}) == len(SUITE)
    used = Counter(split_call(a)[0] for t in SUITE for a in t.actions)
    assert set(used) == set(TOOL_PARAMS), f"tools never used: {set(TOOL_PARAMS) - set(used)}"
    for task in SUITE:
        assert len(task.actions) >= 5, task.id  # AgentBench kept only items needing five calls or more
        assert task.reference_solution[-1].tool == "final_answer"
        assert task.answer and len(task.answer_names) == len(task.answer)
        assert set(task.entities.values()) <= {a.split("(")[1].split(",")[0].rstrip(")") for a in task.actions}
        assert task.graph == "bundled" and task.backends is None


def _episode(env: KGEnv, task: KGTask, replies: list[str]) -> dict[str, object]:
    env.reset(options={"task_id": task.id})
    info: dict[str, object] = {}
    seen = []
    for reply in replies:
        observation, _, terminated, truncated, info = env.step(reply)
        seen.append((reply, observation, info.get("execution")))
        if terminated or truncated:
            break
    assert info["finish_reason"] is FinishReason.COMPLETE, (task.id, seen)
    score = info["score"]
    assert isinstance(score, dict)
    return score


def _wrong_answer(env: KGEnv, task: KGTask) -> list[str]:
    """A committed answer of the wrong kind, disjoint from the gold set by construction:
    a count where entities are asked for, the entities where a count is asked for."""
    first = [env.render_action(step) for step in task.reference_solution[:2]]
    counting = split_call(task.actions[-1])[0] == "count"
    return first + (["Final Answer: #0"] if counting else ["Action: count(#0)", "Final Answer: #1"])


def _check_suite(backend: SPARQLBackend, tasks: list[KGTask] = SUITE) -> None:
    """Oracle F1 = 1 (so the actions compute the stored gold set) and a wrong answer 0, task by task."""
    with KGEnv(sparql_backend=backend) as env:
        assert len(env.tasks) == len(SUITE)
        for task in tasks:
            oracle = [env.render_action(step, form="json" if task.id.endswith("7") else "react")
                      for step in task.reference_solution]
            score = _episode(env, task, oracle)
            assert score["reward"] == 1.0, (task.id, score)
            components = score["components"]
            assert isinstance(components, dict)
            assert components["exact_match"] is True and components["executability"] == 1
            wrong = _episode(env, task, _wrong_answer(env, task))
            assert wrong["reward"] == 0.0 and wrong["success"] is False, (task.id, wrong)


def test_oracle_and_wrong_answer_on_embedded() -> None:
    with EmbeddedSPARQL(bundled_store()) as store:
        _check_suite(store)


@pytest.fixture(scope="module")
def local_server() -> Iterator[OxigraphServer]:
    with OxigraphServer(bundled_store()) as server:
        yield server


def test_oracle_and_wrong_answer_on_a_sparql_endpoint(local_server: OxigraphServer) -> None:
    # Every third question without Docker (the kg container runs all of them below).
    with HTTPSPARQL(local_server.endpoint) as http:
        _check_suite(http, SUITE[::3])


def test_the_endpoint_can_come_from_the_environment(local_server: OxigraphServer,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTUNIT_KG_ENDPOINT", local_server.endpoint)
    with KGEnv(backend="sparql") as env:  # the server asked for: the variable names it
        assert env.backend_name == "sparql"
        _, info = env.reset(options={"task_id": "kg-001"})
        assert info["backend"] == "sparql"
    with KGEnv() as env:  # the bundled graph without backend=: embedded on every host
        assert env.backend_name == "embedded"


@pytest.mark.docker
def test_oracle_and_wrong_answer_on_the_kg_container() -> None:
    from agentunit_gym.backends.sparql.container import SPARQLContainer

    with SPARQLContainer() as container, HTTPSPARQL(container.endpoint) as http:
        _check_suite(http)


def test_made_variables_match_the_final_answer_step() -> None:
    for task in SUITE:
        made = sum(split_call(a)[0] in MAKES_VARIABLE for a in task.actions)
        final = task.reference_solution[-1].arguments
        assert isinstance(final, dict) and final["variable"] == f"#{made - 1}"
