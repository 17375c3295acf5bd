"""Generated KG questions: our templates filled with every fitting entity of the bundled graph.

The templates are the bundled suite's (``make_suite``: the same family names, so a
generated question and a bundled one of the same template share a split) and a few more.
The whole graph is read once (one query per relation, ~1 s), each template's candidates
are enumerated over it, and each answer is computed as the seven tools compute it: a
question is kept when every set its calls make is non-empty and its answer has 1 to 30
members (a count above zero). The test suite replays a sample through the env.

Example:

    >>> from agentunit_gym.domains.kg.generate import generate
    >>> from agentunit_gym.tasks.overlap import content_id
    >>> tasks = generate(3, seed=3, split="train")
    >>> tasks[0].id == content_id("kg", tasks[0].template, tasks[0].question)
    True
    >>> [t.id for t in tasks] == [t.id for t in generate(3, seed=3, split="train")]  # seeded: the same set again
    True
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agentunit_gym.domains.kg.task import KGTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import content_id
from agentunit_gym.tasks.splits import split_of_family

NS = "http://rdf.freebase.com/ns/"
MAX_ANSWERS = 30
"""Questions with more gold answers than this are not kept (as in the bundled suite)."""

ADJ = "location.country.adjoins"
LANG = "location.country.languages_spoken"


@dataclass(frozen=True)
class Candidate:
    """One question of a template, with its computed answer."""

    template: str
    category: str
    question: str
    entities: tuple[tuple[str, str], ...]
    actions: tuple[str, ...]
    answer: tuple[str, ...]


class Graph:
    """The bundled graph as Python maps: one dict of sets per relation, names, numbers."""

    def __init__(self) -> None:
        from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
        from agentunit_gym.domains.kg.store import bundled_store

        self._store = EmbeddedSPARQL(bundled_store())
        self.name: dict[str, str] = {}
        for s, n in self._pairs("type.object.name", literal=True):
            self.name.setdefault(s, n)
        self.types: dict[str, set[str]] = self._map("type.object.type")
        self._relations: dict[str, dict[str, set[str]]] = {}
        self._numbers: dict[str, dict[str, float]] = {}

    def _pairs(self, relation: str, *, literal: bool = False) -> list[tuple[str, str]]:
        kind = "isLiteral(?o)" if literal else "isIRI(?o)"
        rows = self._store.select(f"SELECT ?s ?o WHERE {{ ?s <{NS}{relation}> ?o . FILTER({kind}) }}",
                                  timeout=120, limit=10_000_000).rows
        return [(str(s), str(o)) for s, o in rows if s is not None and o is not None]

    def _map(self, relation: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for s, o in self._pairs(relation):
            out[s].add(o)
        return out

    def rel(self, relation: str) -> dict[str, set[str]]:
        """``subject -> objects`` of ``relation`` (IRIs only, as ``get_neighbors`` follows them)."""
        if relation not in self._relations:
            self._relations[relation] = self._map(relation)
        return self._relations[relation]

    def num(self, attribute: str) -> dict[str, float]:
        """``subject -> value`` of a numeric attribute (the largest when several, as ``argmax`` reads it)."""
        if attribute not in self._numbers:
            rows = self._store.select(f"SELECT ?s ?v WHERE {{ ?s <{NS}{attribute}> ?v . FILTER(isNumeric(?v)) }}",
                                      timeout=120, limit=10_000_000).rows
            found: dict[str, float] = {}
            for s, v in rows:
                try:
                    number = float(str(v))
                except ValueError:
                    continue
                found[str(s)] = max(number, found.get(str(s), number))
            self._numbers[attribute] = found
        return self._numbers[attribute]

    def of_type(self, kind: str) -> list[str]:
        """Entities of a type that have a name, whose name no other entity of the type shares, sorted."""
        members = sorted(e for e, kinds in self.types.items() if kind in kinds and e in self.name)
        counts: dict[str, int] = defaultdict(int)
        for e in members:
            counts[self.name[e]] += 1
        return [e for e in members if counts[self.name[e]] == 1]

    def reach(self, sources: set[str] | frozenset[str], relation: str) -> set[str]:
        out: set[str] = set()
        table = self.rel(relation)
        for s in sources:
            out |= table.get(s, set())
        return out

    def best(self, members: set[str], attribute: str, direction: str) -> set[str]:
        values = {m: v for m in members if (v := self.num(attribute).get(m)) is not None}
        if not values:
            return set()
        target = max(values.values()) if direction == "max" else min(values.values())
        return {m for m, v in values.items() if v == target}


def _label(name: str) -> str:
    return name.split(" (")[0]


def _ok(answer: set[str] | int) -> tuple[str, ...] | None:
    if isinstance(answer, int):
        return (str(answer),) if answer > 0 else None
    if not answer or len(answer) > MAX_ANSWERS:
        return None
    return tuple(sorted(answer))


def _pair_intersections(g: Graph, template: str, relation: str, question: str, count_question: str | None,
                        count_template: str | None) -> Iterator[Candidate]:
    countries = g.of_type("location.country")
    table = g.rel(relation)
    for a, b in itertools.combinations(countries, 2):
        left, right = table.get(a, set()), table.get(b, set())
        if not left or not right:
            continue
        both = (left & right) - {a, b}
        an, bn = g.name[a], g.name[b]
        actions = (f"get_relations({a})", f"get_neighbors({a},{relation})", f"get_relations({b})",
                   f"get_neighbors({b},{relation})", "intersection(#0,#1)")
        entities = ((an, a), (bn, b))
        answer = _ok(both)
        if answer is not None:
            yield Candidate(template, "intersection", question.format(a=an, b=bn), entities, actions, answer)
        if count_template is not None and count_question is not None and (counted := _ok(len(both))):
            yield Candidate(count_template, "count", count_question.format(a=an, b=bn), entities,
                            (*actions, "count(#2)"), counted)


def _border_both(g: Graph) -> Iterator[Candidate]:
    yield from _pair_intersections(g, "kg/border-both", ADJ,
                                   "Which countries share a land border with both {a} and {b}?",
                                   "How many countries share a land border with both {a} and {b}?",
                                   "kg/border-both-count")


def _language_both(g: Graph) -> Iterator[Candidate]:
    yield from _pair_intersections(g, "kg/language-both", LANG, "Which languages are spoken both in {a} and in {b}?",
                                   "How many languages are spoken both in {a} and in {b}?", "kg/language-both-count")


def _currency_continent(g: Graph) -> Iterator[Candidate]:
    used, on = g.rel("finance.currency.countries_used"), g.rel("location.continent.countries")
    for c in g.of_type("finance.currency"):
        for k in g.of_type("location.continent"):
            if not used.get(c) or not on.get(k):
                continue
            answer = _ok(len((used[c] & on[k]) - {c, k}))
            if answer is None:
                continue
            cn, kn = g.name[c], g.name[k]
            yield Candidate("kg/currency-continent-count", "count", f"How many countries in {kn} use the {cn}?",
                            ((cn, c), (kn, k)),
                            (f"get_relations({c})", f"get_neighbors({c},finance.currency.countries_used)",
                             f"get_relations({k})", f"get_neighbors({k},location.continent.countries)",
                             "intersection(#0,#1)", "count(#2)"), answer)


def _continent_language(g: Graph) -> Iterator[Candidate]:
    on, spoken = g.rel("location.continent.countries"), g.rel("language.human_language.countries_spoken_in")
    for k in g.of_type("location.continent"):
        for lang in g.of_type("language.human_language"):
            if not on.get(k) or not spoken.get(lang):
                continue
            both = (on[k] & spoken[lang]) - {k, lang}
            kn, ln = g.name[k], _label(g.name[lang])
            actions = (f"get_relations({k})", f"get_neighbors({k},location.continent.countries)",
                       f"get_relations({lang})", f"get_neighbors({lang},language.human_language.countries_spoken_in)",
                       "intersection(#0,#1)")
            entities = ((kn, k), (ln, lang))
            if (answer := _ok(both)) is not None:
                yield Candidate("kg/continent-language", "intersection",
                                f"In which countries of {kn} is {ln} spoken?", entities, actions, answer)
            if (counted := _ok(len(both))) is not None:
                yield Candidate("kg/continent-language-count", "count",
                                f"In how many countries of {kn} is {ln} spoken?", entities, (*actions, "count(#2)"),
                                counted)


def _country_timezone(g: Graph) -> Iterator[Candidate]:
    cities, located = g.rel("location.country.cities"), g.rel("time.time_zone.locations")
    zones = g.of_type("time.time_zone")
    for c in g.of_type("location.country"):
        if not cities.get(c):
            continue
        for z in zones:
            if not located.get(z):
                continue
            answer = _ok(len((cities[c] & located[z]) - {c, z}))
            if answer is None:
                continue
            cn, zn = g.name[c], g.name[z]
            yield Candidate("kg/country-timezone-count", "count",
                            f"How many cities of {cn} are in the {zn} time zone?", ((cn, c), (zn, z)),
                            (f"get_relations({c})", f"get_neighbors({c},location.country.cities)",
                             f"get_relations({z})", f"get_neighbors({z},time.time_zone.locations)",
                             "intersection(#0,#1)", "count(#2)"), answer)


def _per_country(g: Graph) -> Iterator[Candidate]:
    for a in g.of_type("location.country"):
        an = g.name[a]
        near = g.reach({a}, ADJ)
        if not near:
            continue
        towns = g.reach(near, "location.country.cities") - {a}
        if towns and (answer := _ok(g.best(towns, "location.citytown.population", "max") - {a})):
            yield Candidate("kg/neighbor-biggest-city", "argmax",
                            f"What is the most populous city in the countries that border {an}?", ((an, a),),
                            (f"get_relations({a})", f"get_neighbors({a},{ADJ})", "get_relations(#0)",
                             "get_neighbors(#0,location.country.cities)", "get_attributes(#1)",
                             "argmax(#1,location.citytown.population)"), answer)
        small = g.best(near - {a}, "location.country.area", "min") - {a}
        if small and (answer := _ok(g.reach(small, "location.country.currency_used") - {a})):
            yield Candidate("kg/neighbor-smallest-currency", "argmin",
                            f"Which currency is used by the smallest country, by area, that borders {an}?",
                            ((an, a),),
                            (f"get_relations({a})", f"get_neighbors({a},{ADJ})", "get_attributes(#0)",
                             "argmin(#0,location.country.area)", "get_relations(#1)",
                             "get_neighbors(#1,location.country.currency_used)"), answer)


def _per_language(g: Graph) -> Iterator[Candidate]:
    for lang in g.of_type("language.human_language"):
        label = _label(g.name[lang])
        where = g.reach({lang}, "language.human_language.countries_spoken_in") - {lang}
        top = g.best(where, "location.country.population", "max") - {lang}
        if top and (answer := _ok(g.reach(top, "location.country.capital") - {lang})):
            yield Candidate("kg/language-biggest-country-capital", "argmax",
                            f"What is the capital of the most populous country where {label} is spoken?",
                            ((label, lang),),
                            (f"get_relations({lang})",
                             f"get_neighbors({lang},language.human_language.countries_spoken_in)",
                             "get_attributes(#0)", "argmax(#0,location.country.population)", "get_relations(#1)",
                             "get_neighbors(#1,location.country.capital)"), answer)


def _per_state(g: Graph) -> Iterator[Candidate]:
    for s in g.of_type("location.us_state"):
        sn = g.name[s]
        towns = g.reach({s}, "location.us_state.cities") - {s}
        if not towns:
            continue
        if (answer := _ok(len(g.reach(towns, "location.citytown.time_zone") - {s}))) is not None:
            yield Candidate("kg/state-timezone-count", "count", f"How many time zones are the cities of {sn} in?",
                            ((sn, s),),
                            (f"get_relations({s})", f"get_neighbors({s},location.us_state.cities)",
                             "get_relations(#0)", "get_neighbors(#0,location.citytown.time_zone)", "count(#1)"),
                            answer)
        south = g.best(towns, "location.citytown.latitude", "min") - {s}
        if south and (answer := _ok(g.reach(south, "location.citytown.time_zone") - {s})):
            yield Candidate("kg/state-southernmost-timezone", "argmin",
                            f"In which time zone is the southernmost city of {sn}?", ((sn, s),),
                            (f"get_relations({s})", f"get_neighbors({s},location.us_state.cities)",
                             "get_attributes(#0)", "argmin(#0,location.citytown.latitude)", "get_relations(#1)",
                             "get_neighbors(#1,location.citytown.time_zone)"), answer)


def _per_capital(g: Graph) -> Iterator[Candidate]:
    capitals = set().union(*g.rel("location.country.capital").values())
    for c in g.of_type("location.citytown"):
        if c not in capitals:
            continue
        cn = g.name[c]
        country = g.reach({c}, "location.citytown.capital_of") - {c}
        if country and (answer := _ok(len(g.reach(country, "location.country.administrative_divisions") - {c}))):
            yield Candidate("kg/capital-subdivision-count", "count",
                            f"How many ISO 3166-2 subdivisions does the country whose capital is {cn} have?",
                            ((cn, c),),
                            (f"get_relations({c})", f"get_neighbors({c},location.citytown.capital_of)",
                             "get_relations(#0)", "get_neighbors(#0,location.country.administrative_divisions)",
                             "count(#1)"), answer)


_SOURCES: tuple[Callable[[Graph], Iterator[Candidate]], ...] = (
    _border_both, _language_both, _currency_continent, _continent_language, _country_timezone, _per_country,
    _per_language, _per_state, _per_capital,
)

TEMPLATES: tuple[str, ...] = (
    "kg/border-both", "kg/border-both-count", "kg/language-both", "kg/language-both-count",
    "kg/currency-continent-count", "kg/continent-language", "kg/continent-language-count",
    "kg/country-timezone-count", "kg/neighbor-biggest-city", "kg/neighbor-smallest-currency",
    "kg/language-biggest-country-capital", "kg/state-timezone-count", "kg/state-southernmost-timezone",
    "kg/capital-subdivision-count",
)
"""Every family the generator makes (the first nine are the bundled suite's templates too)."""


def templates() -> tuple[str, ...]:
    """Every family the KG generator makes."""
    return TEMPLATES


@functools.cache
def _graph() -> Graph:
    return Graph()


@functools.cache
def candidates() -> tuple[Candidate, ...]:
    """Every question the templates make over the bundled graph, one per distinct question, in a fixed order."""
    g = _graph()
    seen: set[str] = set()
    out: list[Candidate] = []
    for source in _SOURCES:
        for c in source(g):
            if c.question not in seen:
                seen.add(c.question)
                out.append(c)
    return tuple(out)


def ceiling(split: str | None = None) -> int:
    """How many distinct questions the templates make (of ``split``'s families only)."""
    return sum(1 for c in candidates() if split is None or split_of_family(c.template) == split)


def generate(count: int, *, seed: int = 0, split: str | None = None) -> list[KGTask]:
    """``count`` distinct questions, drawn with ``seed`` from :func:`candidates` (of ``split``'s families only).

    A question's id names it (``gen-kg-<family>-<hash>``, see
    :func:`~agentunit_gym.tasks.overlap.content_id`): the same in every seed and set.

    Raises:
        ConfigError: more questions asked for than the templates make.
    """
    pool = [c for c in candidates() if split is None or split_of_family(c.template) == split]
    if count > len(pool):
        raise ConfigError(f"the KG templates make {len(pool)} distinct question(s)"
                          f"{f' in split {split!r}' if split else ''}, {count} were asked for; ask for fewer.")
    order = list(range(len(pool)))
    random.Random(f"gen-kg:{seed}").shuffle(order)
    g = _graph()
    tasks = []
    for position in order[:count]:
        c = pool[position]
        tasks.append(KGTask.model_validate({
            "id": content_id("kg", c.template, c.question),
            "category": c.category,
            "question": c.question,
            "entities": dict(c.entities),
            "actions": list(c.actions),
            "answer": list(c.answer),
            "answer_names": [g.name.get(a, a) for a in c.answer],
            "labels": sorted({a.split("(")[0] for a in c.actions}),
            "template": c.template,
            "split": split_of_family(c.template),
        }))
    return tasks
