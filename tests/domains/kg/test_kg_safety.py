"""Hostile input never reaches a query as text, never changes the store, always comes back as an observation."""

from __future__ import annotations

import json

import pytest

from agentunit_gym.backends.sparql.base import UnsafeTermError, fb_iri
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.domains.kg.env import KGEnv
from agentunit_gym.domains.kg.task import KGTask
from agentunit_gym.errors import BackendError, BackendTimeoutError

TASK = KGTask.model_validate({
    "id": "hostile", "question": "Which countries border Aland?", "entities": {"Aland": "m.country_a"},
    "actions": ["get_relations(m.country_a)", "get_neighbors(m.country_a,location.country.adjoins)"],
    "answer": ["m.country_b", "m.country_c"],
})

HOSTILE = [
    "m.country_a'", 'm.country_a"', "m.country_a>", "<http://evil/x>", "m.x} ; DROP ALL ; {",
    "} ; DROP GRAPH <urn:x> ; SELECT * WHERE {", "m.a .} INSERT DATA { <a:a> <a:b> <a:c> } #",
    "#0 } UNION { ?s ?p ?o", "#99", "#-1", "#0x1", "variable #12345678901234567890",
    "m.country_a\nDELETE WHERE { ?s ?p ?o }", "m.éàü", "m." + "a" * 1_000_000, "\x00", "",
]

REPLIES = (
    [f"Action: get_relations({h})" for h in HOSTILE]
    + [f"Action: get_neighbors(m.country_a, {h})" for h in HOSTILE]
    + [f"Action: argmax(#0, {h})" for h in HOSTILE]
    + [f"Action: intersection({h}, #0)" for h in HOSTILE]
    + [json.dumps({"name": "get_relations", "arguments": {"variable": h}}) for h in HOSTILE]
    + [json.dumps({"name": "final_answer", "arguments": {"variable": h}}) for h in HOSTILE]
    + ["Action: get_relations(" + "(" * 10_000 + ")", "Final Answer: #" + "9" * 5000, "{" * 100_000,
       "Action: " * 10_000]
)


def test_names_are_checked_before_they_enter_a_query() -> None:
    assert fb_iri("m.country_a") == "<http://rdf.freebase.com/ns/m.country_a>"
    for bad in ("m.x>", "m.x y", "a", "m.x}", "m.x'", "location.country.capital\n", "m.é"):
        with pytest.raises(UnsafeTermError):
            fb_iri(bad)


def test_hostile_replies_are_observations_and_change_nothing(small_store: EmbeddedSPARQL) -> None:
    before = small_store.triple_count()
    with KGEnv(sparql_backend=small_store, tasks=[TASK], max_steps=10_000) as env:
        env.reset(options={"task_id": "hostile"})
        env.step("Action: get_relations(Aland)")
        env.step("Action: get_neighbors(Aland, location.country.adjoins)")  # #0 exists
        env.step("Action: get_attributes(#0)")
        for reply in REPLIES:
            observation, reward, terminated, truncated, info = env.step(reply)
            assert isinstance(observation, str) and observation and len(observation) < 2_000, reply[:80]
            assert reward == 0.0 and not terminated and not truncated, reply[:80]
            classified = info.get("action_error") or (info.get("execution") if info.get("execution_error") else None)
            assert classified, f"not classified: {reply[:80]!r} -> {observation[:120]!r}"
        # The env still works, and the answer is unchanged.
        _, reward, terminated, _, info = env.step("Final Answer: #0")
        assert terminated and reward == 1.0
    assert small_store.triple_count() == before


def test_the_store_is_read_only(small_store: EmbeddedSPARQL) -> None:
    before = small_store.triple_count()
    with pytest.raises(BackendError):
        small_store.update("INSERT DATA { <urn:a> <urn:b> <urn:c> }")
    with pytest.raises(BackendError):
        small_store.select("INSERT DATA { <urn:a> <urn:b> <urn:c> }", timeout=5, limit=10)
    assert small_store.triple_count() == before


def test_every_query_has_a_time_limit_and_a_cap(small_store: EmbeddedSPARQL) -> None:
    # A cross product streamed row by row stops at the deadline; a cap stops a long result.
    query = "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
    with pytest.raises(BackendTimeoutError):
        small_store.select(query, timeout=0.05, limit=10**9)
    capped = small_store.select(query, timeout=5, limit=7)
    assert len(capped.rows) == 7 and capped.truncated
