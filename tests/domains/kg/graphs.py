"""Small graphs for the KG tests, written in N-Triples by hand (so expected answers are known)."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL, build_store
from agentunit_gym.domains.kg.graph import GraphSource

NS = "http://rdf.freebase.com/ns/"
INT = "<http://www.w3.org/2001/XMLSchema#integer>"
DBL = "<http://www.w3.org/2001/XMLSchema#double>"


def _t(s: str, p: str, o: str) -> str:
    return f"<{NS}{s}> <{NS}{p}> {o} .\n"


def _e(s: str, p: str, o: str) -> str:
    return _t(s, p, f"<{NS}{o}>")


def _n(s: str, p: str, value: int | float) -> str:
    return _t(s, p, f'"{value}"^^{INT if isinstance(value, int) else DBL}')


def small_graph() -> str:
    """Four countries on one continent, in the bundled schema.

    adjoins: a-b, a-c, b-c, c-d. population: a 100, b 300, c 300 (a tie), d 50.
    area: a 10.5, b 20.0, c 5.0, d 7.0. Currencies: a, b use e; c, d use f.
    Cities: c1 in a (capital, 10 people), c2 in b (20), c3 in c (20).
    """
    lines: list[str] = []
    names = {"m.cont_x": "Xland", "m.country_a": "Aland", "m.country_b": "Bland", "m.country_c": "Cland",
             "m.country_d": "Dland", "m.cur_e": "Ecu", "m.cur_f": "Fcu", "m.city_1": "One", "m.city_2": "Two",
             "m.city_3": "Three"}
    types = {"m.cont_x": "location.continent", "m.cur_e": "finance.currency", "m.cur_f": "finance.currency",
             **{f"m.country_{c}": "location.country" for c in "abcd"},
             **{f"m.city_{i}": "location.citytown" for i in (1, 2, 3)}}
    for ent, name in names.items():
        lines.append(_t(ent, "type.object.name", f'"{name}"@en'))
        lines.append(_e(ent, "type.object.type", types[ent]))
    for c in "abcd":
        lines.append(_e("m.cont_x", "location.continent.countries", f"m.country_{c}"))
        lines.append(_e(f"m.country_{c}", "location.country.continent", "m.cont_x"))
    for x, y in (("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")):
        lines.append(_e(f"m.country_{x}", "location.country.adjoins", f"m.country_{y}"))
        lines.append(_e(f"m.country_{y}", "location.country.adjoins", f"m.country_{x}"))
    for c, pop, area in (("a", 100, 10.5), ("b", 300, 20.0), ("c", 300, 5.0), ("d", 50, 7.0)):
        lines.append(_n(f"m.country_{c}", "location.country.population", pop))
        lines.append(_n(f"m.country_{c}", "location.country.area", area))
    for c, cur in (("a", "e"), ("b", "e"), ("c", "f"), ("d", "f")):
        lines.append(_e(f"m.country_{c}", "location.country.currency_used", f"m.cur_{cur}"))
        lines.append(_e(f"m.cur_{cur}", "finance.currency.countries_used", f"m.country_{c}"))
    for i, c, pop in ((1, "a", 10), (2, "b", 20), (3, "c", 20)):
        lines.append(_e(f"m.country_{c}", "location.country.cities", f"m.city_{i}"))
        lines.append(_e(f"m.city_{i}", "location.citytown.country", f"m.country_{c}"))
        lines.append(_n(f"m.city_{i}", "location.citytown.population", pop))
    lines.append(_e("m.country_a", "location.country.capital", "m.city_1"))
    lines.append(_e("m.city_1", "location.citytown.capital_of", "m.country_a"))
    lines.append(_t("m.city_1", "type.object.name", '"Üñï ☃ \\"quoted\\""@de'))
    return "".join(lines)


def freebase_graph() -> str:
    """A few Freebase mids and relations, with the schema's expected types (as Freebase has them).

    Rocket engines (m.0e1, m.0e2, m.0e3) with cycles and fuels; designers; thrust as a number.
    """
    lines = []
    for ent, kind, name in (("m.0gas", "spaceflight.rocket_engine_cycle", "Gas-generator cycle"),
                            ("m.0ker", "spaceflight.rocket_engine_cycle", "Kerosene"),
                            ("m.0e1", "spaceflight.bipropellant_rocket_engine", "Engine One"),
                            ("m.0e2", "spaceflight.bipropellant_rocket_engine", "Engine Two"),
                            ("m.0e3", "spaceflight.bipropellant_rocket_engine", "Engine Three"),
                            ("m.0d1", "spaceflight.rocket_engine_designer", "Designer One"),
                            ("m.0d2", "spaceflight.rocket_engine_designer", "Designer Two")):
        lines.append(_t(ent, "type.object.name", f'"{name}"@en'))
        lines.append(_e(ent, "type.object.type", kind))
    for cycle, engines in (("m.0gas", ("m.0e1", "m.0e2")), ("m.0ker", ("m.0e2", "m.0e3"))):
        for engine in engines:
            lines.append(_e(cycle, "spaceflight.rocket_engine_cycle.rocket_engines", engine))
    for engine, designer, thrust in (("m.0e1", "m.0d1", 100), ("m.0e2", "m.0d2", 700), ("m.0e3", "m.0d1", 300)):
        lines.append(_e(engine, "spaceflight.rocket_engine.designed_by", designer))
        lines.append(_n(engine, "spaceflight.rocket_engine.thrust", thrust))
    for prop, kind in (("spaceflight.rocket_engine_cycle.rocket_engines", "spaceflight.bipropellant_rocket_engine"),
                       ("spaceflight.rocket_engine.designed_by", "spaceflight.rocket_engine_designer")):
        lines.append(_e(prop, "type.property.expected_type", kind))
    return "".join(lines)


def open_graph(text: str, root: Path) -> EmbeddedSPARQL:
    """Build (once per root) and open a store for ``text``."""
    source = GraphSource.from_text(text)
    return EmbeddedSPARQL(build_store(source.key, source.ntriples, root=root))
