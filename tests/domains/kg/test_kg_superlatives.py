"""argmax/argmin as AgentBench ranks them: dates in time order, each entity by its extreme value."""

from __future__ import annotations

import doctest
from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sparql import base
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL

from .graphs import NS, open_graph

XSD = "http://www.w3.org/2001/XMLSchema#"
FILMS = {"m.0f1": "Film One", "m.0f2": "Film Two", "m.0f3": "Film Three", "m.0f4": "Film Four"}


def _literal(value: str, kind: str) -> str:
    return f'"{value}"^^<{XSD}{kind}>'


def dated_graph() -> str:
    """Four films in Freebase's shape, released on dates of three lexical kinds.

    initial_release_date: f1 1999-03-31, f2 2001 (a gYear: 2001-01-01), f3 1999-03-30T23:00:00
    and 2010-05 (two releases), f4 1985-07-03. runtime (numbers): f1 136, f2 95 and 178, f3 120,
    f4 116. tagline (text, never ranked): every film.
    """
    triples = [f'<{NS}m.0dir> <{NS}type.object.name> "Dee"@en .',
               f"<{NS}m.0dir> <{NS}type.object.type> <{NS}film.director> .",
               f"<{NS}film.director.film> <{NS}type.property.expected_type> <{NS}film.film> ."]
    for film, name in FILMS.items():
        triples.append(f"<{NS}m.0dir> <{NS}film.director.film> <{NS}{film}> .")
        triples.append(f'<{NS}{film}> <{NS}type.object.name> "{name}"@en .')
        triples.append(f"<{NS}{film}> <{NS}type.object.type> <{NS}film.film> .")
        triples.append(f'<{NS}{film}> <{NS}film.film.tagline> "see {name}"@en .')
    for film, value, kind in (("m.0f1", "1999-03-31", "date"), ("m.0f2", "2001", "gYear"),
                              ("m.0f3", "1999-03-30T23:00:00", "dateTime"), ("m.0f3", "2010-05", "gYearMonth"),
                              ("m.0f4", "1985-07-03", "date")):
        triples.append(f"<{NS}{film}> <{NS}film.film.initial_release_date> {_literal(value, kind)} .")
    for film, minutes in (("m.0f1", 136), ("m.0f2", 95), ("m.0f2", 178), ("m.0f3", 120), ("m.0f4", 116)):
        triples.append(f"<{NS}{film}> <{NS}film.film.runtime> {_literal(str(minutes), 'integer')} .")
    return "\n".join(triples) + "\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedSPARQL]:
    opened = open_graph(dated_graph(), tmp_path_factory.mktemp("kg-dates"))
    yield opened
    opened.close()


def _best(store: EmbeddedSPARQL, predicate: str, direction: base.Direction) -> set[str]:
    values = store.extremes(FILMS, predicate, direction, timeout=10, limit=100)
    top = (max if direction == "max" else min)(values.values())
    return {film for film, key in values.items() if key == top}


def test_dates_rank_in_time_order_across_lexical_kinds(store: EmbeddedSPARQL) -> None:
    # f3's 2010-05 is the latest release; f4's 1985 the earliest.
    assert _best(store, "film.film.initial_release_date", "max") == {"m.0f3"}
    assert _best(store, "film.film.initial_release_date", "min") == {"m.0f4"}


def test_a_year_ranks_at_its_first_day_and_a_time_of_day_counts(store: EmbeddedSPARQL) -> None:
    values = store.extremes(["m.0f1", "m.0f2"], "film.film.initial_release_date", "min", timeout=10, limit=100)
    assert values["m.0f2"] == (1, 2001.0, 1.0, 1.0, 0.0)
    assert values["m.0f1"] < values["m.0f2"]
    # 1999-03-30T23:00 is before 1999-03-31: f3's earliest release beats f1's.
    assert _best(store, "film.film.initial_release_date", "min") == {"m.0f4"}
    early = store.extremes(["m.0f1", "m.0f3"], "film.film.initial_release_date", "min", timeout=10, limit=100)
    assert early["m.0f3"] < early["m.0f1"]


def test_argmin_uses_each_entitys_smallest_value(store: EmbeddedSPARQL) -> None:
    # f2 runs 95 and 178 minutes: the shortest film is f2 (by its 95), the longest also f2 (178).
    assert _best(store, "film.film.runtime", "min") == {"m.0f2"}
    assert _best(store, "film.film.runtime", "max") == {"m.0f2"}
    assert store.extremes(["m.0f2"], "film.film.runtime", "min", timeout=10, limit=100) == {"m.0f2": (0, 95.0)}


def test_text_does_not_rank(store: EmbeddedSPARQL) -> None:
    assert store.extremes(FILMS, "film.film.tagline", "max", timeout=10, limit=100) == {}


def test_order_key_docstring_examples() -> None:
    assert doctest.testmod(base, raise_on_error=False).failed == 0


@pytest.mark.parametrize(("tool", "answer"), [("argmax", "m.0f3"), ("argmin", "m.0f4")])
def test_an_episode_answers_a_date_superlative(store: EmbeddedSPARQL, tool: str, answer: str) -> None:
    from agentunit_gym.domains.kg.env import KGEnv
    from agentunit_gym.domains.kg.task import KGTask

    task = KGTask.model_validate({
        "id": f"films-{tool}", "graph": "freebase", "question": "Which of Dee's films was released last (or first)?",
        "entities": {"Dee": "m.0dir"},
        "actions": ["get_relations(m.0dir)", "get_neighbors(m.0dir,film.director.film)", "get_attributes(#0)",
                    f"{tool}(#0,film.film.initial_release_date)"],
        "answer": [answer]})
    with KGEnv(sparql_backend=store, graph="freebase", tasks=[task]) as env:
        env.reset(options={"task": task})
        replies = ["Action: get_relations(Dee)", "Action: get_neighbors(Dee, film.director.film)",
                   "Action: get_attributes(#0)", f"Action: {tool}(#0, film.film.initial_release_date)",
                   "Final Answer: #1"]
        observations = []
        for reply in replies:
            observation, reward, terminated, _, info = env.step(reply)
            observations.append(observation)
        assert terminated and reward == 1.0, observations
