"""KG variables as lazily composed programs over the graph.

A variable is a program: an entity, the neighbours of a program via a relation, the
intersection of two programs, the argmax/argmin of a program by an attribute, or the count
of a program. Nothing runs when a variable is made (as in AgentBench); a program is
evaluated when the agent lists its relations or attributes, and when it commits the
variable as its answer, step by step: each step is one SPARQL lookup over the previous
step's set (see :class:`agentunit_gym.domains.kg.tools.KGSession`), so a long chain costs
the sum of its steps, never their product.

Safety: a program holds only entity ids that matched :data:`ENTITY_ID` and property names
that matched :data:`PROPERTY_NAME` (and, in the env, that the store itself listed). They
enter a query as full IRIs ``<http://rdf.freebase.com/ns/...>`` whose characters are
letters, digits, ``_`` and ``.`` only (:func:`~agentunit_gym.backends.sparql.base.fb_iri`
re-checks every name it writes): no agent text can close a term or a group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from agentunit_gym.backends.sparql.base import fb_iri
from agentunit_gym.domains.kg.schema import NAME, TYPE

ENTITY_ID = re.compile(r"^[mfg]\.[A-Za-z0-9_]+$")
"""A Freebase-style entity id (AgentBench accepts ``^(m|f)\\.\\w+$``; ``g.`` ids occur in Freebase too)."""
PROPERTY_NAME = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")
"""A dotted property name such as ``location.country.capital``."""

COUNT_TYPE = "type.int"
"""The type AgentBench gives a ``count`` variable."""

HIDDEN_PROPERTIES = frozenset({NAME, TYPE})


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


def expected_type_query(relation: str) -> str:
    """The range a Freebase schema gives a property (``type.property.expected_type``)."""
    return f"SELECT ?t WHERE {{ {fb_iri(relation)} {fb_iri('type.property.expected_type')} ?t }} LIMIT 1"
