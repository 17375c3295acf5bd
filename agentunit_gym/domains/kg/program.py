"""KG variables as lazily composed programs, compiled to SPARQL from validated terms only.

A variable is a program over the graph: an entity, the neighbours of a program via a
relation, the intersection of two programs, the argmax/argmin of a program by an
attribute, or the count of a program. Nothing runs when a variable is made (as in
AgentBench); a program runs when the agent lists its relations or attributes, and when it
commits the variable as its answer.

Safety: a program holds only entity ids that matched :data:`ENTITY_ID` and property names
that matched :data:`PROPERTY_NAME` (and, in the env, that the store itself listed). They
enter a query as full IRIs ``<http://rdf.freebase.com/ns/...>``, whose characters the two
patterns limit to letters, digits, ``_`` and ``.``: no agent text can close a term or a
group. :func:`iri` re-checks every name it writes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from agentunit_gym.domains.kg.schema import FREEBASE_NS, NAME, TYPE

ENTITY_ID = re.compile(r"^[mfg]\.[A-Za-z0-9_]+$")
"""A Freebase-style entity id (AgentBench accepts ``^(m|f)\\.\\w+$``; ``g.`` ids occur in Freebase too)."""
PROPERTY_NAME = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")
"""A dotted property name such as ``location.country.capital``."""

COUNT_TYPE = "type.int"
"""The type AgentBench gives a ``count`` variable."""

HIDDEN_PROPERTIES = frozenset({NAME, TYPE})


class UnsafeTermError(ValueError):
    """A name that may not go into a query (a bug upstream: names are validated on entry)."""


def iri(name: str) -> str:
    """The full IRI term of an entity id or a property name.

    Raises:
        UnsafeTermError: the name is neither an entity id nor a dotted property name.
    """
    if not (ENTITY_ID.match(name) or PROPERTY_NAME.match(name)):
        raise UnsafeTermError(f"not a valid entity id or property name: {name[:80]!r}")
    return f"<{FREEBASE_NS}{name}>"


@dataclass(frozen=True)
class Program:
    """Base of the program nodes."""

    def entities(self) -> frozenset[str]:
        """The entity ids the program mentions (AgentBench leaves them out of its answers)."""
        raise NotImplementedError

    def s_expression(self) -> str:
        """The program in AgentBench's S-expression form (``(JOIN (R rel) m.x)`` ...)."""
        raise NotImplementedError


@dataclass(frozen=True)
class EntityRef(Program):
    id: str

    def entities(self) -> frozenset[str]:
        return frozenset({self.id})

    def s_expression(self) -> str:
        return self.id


@dataclass(frozen=True)
class Neighbors(Program):
    """Everything ``source`` reaches through ``relation`` (``get_neighbors``)."""

    source: Program
    relation: str

    def entities(self) -> frozenset[str]:
        return self.source.entities()

    def s_expression(self) -> str:
        return f"(JOIN (R {self.relation}) {self.source.s_expression()})"


@dataclass(frozen=True)
class Intersection(Program):
    left: Program
    right: Program

    def entities(self) -> frozenset[str]:
        return self.left.entities() | self.right.entities()

    def s_expression(self) -> str:
        return f"(AND {self.left.s_expression()} {self.right.s_expression()})"


@dataclass(frozen=True)
class Superlative(Program):
    """The members of ``source`` with the largest (``max``) or smallest (``min``) ``attribute``; ties all kept."""

    source: Program
    attribute: str
    direction: Literal["max", "min"]

    def entities(self) -> frozenset[str]:
        return self.source.entities()

    def s_expression(self) -> str:
        return f"(ARG{self.direction.upper()} {self.source.s_expression()} {self.attribute})"


@dataclass(frozen=True)
class Count(Program):
    source: Program

    def entities(self) -> frozenset[str]:
        return self.source.entities()

    def s_expression(self) -> str:
        return f"(COUNT {self.source.s_expression()})"


# ------------------------------------------------------------------ compiler

class _Names:
    def __init__(self) -> None:
        self._ids = itertools.count()

    def fresh(self, stem: str = "v") -> str:
        return f"?{stem}{next(self._ids)}"


def _pattern(program: Program, var: str, names: _Names) -> Iterator[str]:
    """Graph-pattern clauses binding ``var`` to the members of ``program``."""
    if isinstance(program, EntityRef):
        yield f"VALUES {var} {{ {iri(program.id)} }}"
    elif isinstance(program, Neighbors):
        if isinstance(program.source, EntityRef):
            yield f"{iri(program.source.id)} {iri(program.relation)} {var} ."
        else:
            inner = names.fresh()
            yield from _pattern(program.source, inner, names)
            yield f"{inner} {iri(program.relation)} {var} ."
    elif isinstance(program, Intersection):
        yield from _pattern(program.left, var, names)
        yield from _pattern(program.right, var, names)
    elif isinstance(program, Superlative):
        best = names.fresh("best")
        inner_var = names.fresh()
        inner_value = names.fresh("value")
        aggregate = "MAX" if program.direction == "max" else "MIN"
        inner = " ".join(_pattern(program.source, inner_var, names))
        yield from _pattern(program.source, var, names)
        yield f"{var} {iri(program.attribute)} {best} ."
        yield (f"{{ SELECT ({aggregate}({inner_value}) AS {best}) WHERE {{ {inner} "
               f"{inner_var} {iri(program.attribute)} {inner_value} . FILTER(isNumeric({inner_value})) }} }}")
    elif isinstance(program, Count):
        raise UnsafeTermError("a count is a number, not a set of entities: it has no graph pattern")
    else:  # pragma: no cover - every node type is handled above
        raise UnsafeTermError(f"unknown program node {type(program).__name__}")


def _answer_filters(program: Program, var: str) -> list[str]:
    filters = [f"FILTER(!isLiteral({var}) || lang({var}) = '' || langMatches(lang({var}), 'en'))"]
    mentioned = sorted(program.entities())
    if mentioned and not isinstance(program, EntityRef):
        filters.append(f"FILTER({var} NOT IN ({', '.join(iri(e) for e in mentioned)}))")
    return filters


def members_query(program: Program, *, limit: int) -> str:
    """``SELECT DISTINCT ?x``: the members of a program (a count gives one row, the number).

    Topic entities the program mentions are left out, as AgentBench's executor does.
    """
    names = _Names()
    if isinstance(program, Count):
        body = " ".join([*_pattern(program.source, "?x", names), *_answer_filters(program.source, "?x")])
        return f"SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE {{ {body} }}"
    body = " ".join([*_pattern(program, "?x", names), *_answer_filters(program, "?x")])
    return f"SELECT DISTINCT ?x WHERE {{ {body} }} LIMIT {int(limit)}"


def out_properties_query(program: Program, *, literal: bool, limit: int) -> str:
    """``SELECT DISTINCT ?p``: properties leaving the program's members (to entities, or to literals)."""
    names = _Names()
    kind = "isLiteral(?o)" if literal else "isIRI(?o)"
    body = " ".join([*_pattern(program, "?x", names), *_answer_filters(program, "?x")])
    return (f"SELECT DISTINCT ?p WHERE {{ {body} ?x ?p ?o . FILTER({kind}) "
            f"FILTER(STRSTARTS(STR(?p), '{FREEBASE_NS}')) }} LIMIT {int(limit)}")


def expected_type_query(relation: str) -> str:
    """The range a Freebase schema gives a property (``type.property.expected_type``)."""
    return f"SELECT ?t WHERE {{ {iri(relation)} {iri('type.property.expected_type')} ?t }} LIMIT 1"
