"""Write the bundled KG suite: our question templates, filled from the graph, gold answers by running them.

Run ``python -m agentunit_gym.domains.kg.make_suite --output agentunit_gym/domains/kg/suite/bundled.yaml``
in a source checkout after a change to the graph or the templates (it writes only where it is
told: never into an installed package). ``--per-template N`` keeps N questions per template
(the bundled suite: 7). For more questions than the suite, with ids of their own and splits,
use the generator (:mod:`agentunit_gym.domains.kg.generate`, ``agentunit-gym tasks generate``).

Each question's ``actions`` are the reference tool calls (at least five, as AgentBench kept
only such items), and its ``answer`` is what those calls' last variable holds on the
embedded store: computed, never typed in. A test replays every question on every backend
and checks the answer again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.domains.kg.store import bundled_store
from agentunit_gym.domains.kg.task import MAKES_VARIABLE, split_call
from agentunit_gym.domains.kg.tools import KGSession, ToolFailure, Vocabulary
from agentunit_gym.errors import ConfigError

PER_TEMPLATE = 7
"""Questions per template in the bundled suite (the default of ``per_template``)."""
MAX_ANSWERS = 30


@dataclass(frozen=True)
class Draft:
    template: str
    category: str
    question: str
    entities: dict[str, str]
    actions: tuple[str, ...]


def _names(store: EmbeddedSPARQL, kind: str) -> list[tuple[str, str]]:
    """``(id, name)`` of every entity of a type, sorted by id."""
    query = ("SELECT ?e ?n WHERE { ?e <http://rdf.freebase.com/ns/type.object.type> "
             f"<http://rdf.freebase.com/ns/{kind}> . ?e <http://rdf.freebase.com/ns/type.object.name> ?n }}")
    rows = store.select(query, timeout=60, limit=1_000_000).rows
    return sorted((str(r[0]), str(r[1])) for r in rows)


def _by_name(pairs: list[tuple[str, str]], wanted: list[str]) -> list[tuple[str, str]]:
    index = {name: ent for ent, name in pairs}
    return [(index[n], n) for n in wanted if n in index]


COUNTRIES = ["France", "Germany", "Brazil", "China", "Russia", "India", "Austria", "Hungary", "Poland", "Spain",
             "Italy", "Argentina", "Peru", "Kenya", "Tanzania", "Zambia", "Mali", "Niger", "Serbia", "Turkey",
             "Iran", "Sudan", "Ukraine", "Belarus", "Colombia", "Bolivia", "Nigeria", "Chad", "Laos", "Switzerland"]
LANGUAGES = ["English", "French", "Spanish", "Portuguese", "Arabic", "German", "Russian", "Italian", "Dutch",
             "Swahili (macrolanguage)", "Malay (macrolanguage)", "Chinese"]
STATES = ["California", "Texas", "Florida", "New York", "Oregon", "Nevada", "Michigan", "Idaho", "Kentucky",
          "Tennessee", "Alaska", "Indiana", "Arizona", "Nebraska"]
CURRENCY_CONTINENTS = [("Euro", "Europe"), ("US Dollar", "North America"), ("CFA Franc BCEAO", "Africa"),
                       ("CFA Franc BEAC", "Africa"), ("Australian Dollar", "Oceania"), ("US Dollar", "Oceania"),
                       ("Euro", "Africa"), ("US Dollar", "South America"), ("East Caribbean Dollar", "North America"),
                       ("New Zealand Dollar", "Oceania"), ("Euro", "North America"), ("US Dollar", "Asia")]
CAPITALS = ["Paris", "Berlin", "Madrid", "Rome", "Lisbon", "Warsaw", "Vienna", "Tokyo", "Nairobi", "Lima",
            "Ottawa", "Canberra", "Oslo", "Manila"]


def drafts(store: EmbeddedSPARQL) -> Iterator[Draft]:
    """Every candidate question, template by template."""
    countries = _names(store, "location.country")
    languages = _names(store, "language.human_language")
    states = _names(store, "location.us_state")
    currencies = _names(store, "finance.currency")
    continents = _names(store, "location.continent")
    cities = _names(store, "location.citytown")
    adj = "location.country.adjoins"
    picked = _by_name(countries, COUNTRIES)

    for (a, an), (b, bn) in zip(picked, picked[1:], strict=False):
        yield Draft("kg/border-both", "intersection",
                    f"Which countries share a land border with both {an} and {bn}?", {an: a, bn: b},
                    (f"get_relations({a})", f"get_neighbors({a},{adj})", f"get_relations({b})",
                     f"get_neighbors({b},{adj})", "intersection(#0,#1)"))
    lang = "location.country.languages_spoken"
    for (a, an), (b, bn) in zip(picked[::2], picked[1::2], strict=False):
        yield Draft("kg/language-both", "intersection",
                    f"Which languages are spoken both in {an} and in {bn}?", {an: a, bn: b},
                    (f"get_relations({a})", f"get_neighbors({a},{lang})", f"get_relations({b})",
                     f"get_neighbors({b},{lang})", "intersection(#0,#1)"))
    cur_index = {name: ent for ent, name in currencies}
    cont_index = {name: ent for ent, name in continents}
    for cur_name, cont_name in CURRENCY_CONTINENTS:
        if cur_name not in cur_index or cont_name not in cont_index:
            continue
        c, k = cur_index[cur_name], cont_index[cont_name]
        yield Draft("kg/currency-continent-count", "count",
                    f"How many countries in {cont_name} use the {cur_name}?", {cur_name: c, cont_name: k},
                    (f"get_relations({c})", f"get_neighbors({c},finance.currency.countries_used)",
                     f"get_relations({k})", f"get_neighbors({k},location.continent.countries)",
                     "intersection(#0,#1)", "count(#2)"))
    for a, an in picked:
        yield Draft("kg/neighbor-biggest-city", "argmax",
                    f"What is the most populous city in the countries that border {an}?", {an: a},
                    (f"get_relations({a})", f"get_neighbors({a},{adj})", "get_relations(#0)",
                     "get_neighbors(#0,location.country.cities)", "get_attributes(#1)",
                     "argmax(#1,location.citytown.population)"))
    for ent, name in _by_name(languages, LANGUAGES):
        label = name.split(" (")[0]
        yield Draft("kg/language-biggest-country-capital", "argmax",
                    f"What is the capital of the most populous country where {label} is spoken?",
                    {label: ent},
                    (f"get_relations({ent})", f"get_neighbors({ent},language.human_language.countries_spoken_in)",
                     "get_attributes(#0)", "argmax(#0,location.country.population)", "get_relations(#1)",
                     "get_neighbors(#1,location.country.capital)"))
    for a, an in picked:
        yield Draft("kg/neighbor-smallest-currency", "argmin",
                    f"Which currency is used by the smallest country, by area, that borders {an}?",
                    {an: a},
                    (f"get_relations({a})", f"get_neighbors({a},{adj})", "get_attributes(#0)",
                     "argmin(#0,location.country.area)", "get_relations(#1)",
                     "get_neighbors(#1,location.country.currency_used)"))
    for ent, name in _by_name(states, STATES):
        yield Draft("kg/state-timezone-count", "count",
                    f"How many time zones are the cities of {name} in?", {name: ent},
                    (f"get_relations({ent})", f"get_neighbors({ent},location.us_state.cities)", "get_relations(#0)",
                     "get_neighbors(#0,location.citytown.time_zone)", "count(#1)"))
    for ent, name in _by_name(states, STATES):
        yield Draft("kg/state-southernmost-timezone", "argmin",
                    f"In which time zone is the southernmost city of {name}?", {name: ent},
                    (f"get_relations({ent})", f"get_neighbors({ent},location.us_state.cities)", "get_attributes(#0)",
                     "argmin(#0,location.citytown.latitude)", "get_relations(#1)",
                     "get_neighbors(#1,location.citytown.time_zone)"))
    capital_ids = {r[0] for r in store.select(
        "SELECT ?c WHERE { ?x <http://rdf.freebase.com/ns/location.country.capital> ?c }",
        timeout=60, limit=10_000).rows}
    for ent, name in _by_name([c for c in cities if c[0] in capital_ids], CAPITALS):
        yield Draft("kg/capital-subdivision-count", "count",
                    f"How many ISO 3166-2 subdivisions does the country whose capital is {name} have?",
                    {name: ent},
                    (f"get_relations({ent})", f"get_neighbors({ent},location.citytown.capital_of)",
                     "get_relations(#0)", "get_neighbors(#0,location.country.administrative_divisions)",
                     "count(#1)"))


def run_actions(store: EmbeddedSPARQL, entities: dict[str, str], actions: tuple[str, ...]) -> list[str]:
    """The answer set of the last variable the calls make (what the oracle would commit).

    Raises:
        ToolFailure: a call cannot run.
    """
    session = KGSession(store, entities, Vocabulary.bundled(), timeout=30.0, max_results=100_000)
    for text in actions:
        name, arguments = split_call(text)
        session.call(name, arguments)
    made = sum(split_call(a)[0] in MAKES_VARIABLE for a in actions)
    return session.answer(session.variables[made - 1])


def make_suite(store: EmbeddedSPARQL, names: Callable[[str], str], *,
               per_template: int = PER_TEMPLATE) -> list[dict[str, Any]]:
    """The suite's task mappings: up to ``per_template`` questions of each template, in template order.

    Raises:
        ConfigError: ``per_template`` below 1.
    """
    if per_template < 1:
        raise ConfigError(f"per_template must be at least 1, got {per_template}.")
    tasks: list[dict[str, Any]] = []
    per_key: dict[str, int] = {}
    seen: set[str] = set()
    for draft in drafts(store):
        key = draft.template
        if per_key.get(key, 0) >= per_template or draft.question in seen:
            continue
        try:
            answer = run_actions(store, draft.entities, draft.actions)
        except ToolFailure:
            continue  # e.g. a country whose capital the data does not name
        if not answer or len(answer) > MAX_ANSWERS or answer == ["0"]:
            continue
        per_key[key] = per_key.get(key, 0) + 1
        seen.add(draft.question)
        tasks.append({
            "id": f"kg-{len(tasks) + 1:03d}",
            "category": draft.category,
            "question": draft.question,
            "entities": draft.entities,
            "actions": list(draft.actions),
            "answer": answer,
            "answer_names": [names(a) for a in answer],
            "labels": sorted({split_call(a)[0] for a in draft.actions}),
            "template": draft.template,
        })
    return tasks


def main(argv: list[str] | None = None) -> int:
    """Write the suite to ``--output`` (required: nothing is written into the package by default)."""
    parser = argparse.ArgumentParser(prog="python -m agentunit_gym.domains.kg.make_suite",
                                     description="Write the KG suite from the templates.")
    parser.add_argument("--output", type=Path, required=True,
                        help="the YAML file to write (the bundled suite: agentunit_gym/domains/kg/suite/bundled.yaml "
                             "in a source checkout)")
    parser.add_argument("--per-template", type=int, default=PER_TEMPLATE,
                        help=f"questions per template (default {PER_TEMPLATE})")
    args = parser.parse_args(argv)
    store = EmbeddedSPARQL(bundled_store())

    def names(ent: str) -> str:
        if not ent.startswith("m."):
            return ent
        rows = store.select(f"SELECT ?n WHERE {{ <http://rdf.freebase.com/ns/{ent}> "
                            "<http://rdf.freebase.com/ns/type.object.name> ?n }", timeout=10, limit=1).rows
        return str(rows[0][0]) if rows else ent

    tasks = make_suite(store, names, per_template=args.per_template)
    out: Path = args.output
    header = ("# The bundled KG suite. Generated by `python -m agentunit_gym.domains.kg.make_suite`:\n"
              "# questions from our templates, answers computed by running the actions. Do not edit by hand.\n")
    out.write_text(header + yaml.safe_dump(tasks, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    print(f"wrote {len(tasks)} tasks to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
