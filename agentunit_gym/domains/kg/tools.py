"""The seven KG tools with AgentBench's semantics, over a :class:`SPARQLBackend`.

One :class:`KGSession` per episode holds the variables made so far (``#0``, ``#1`` ...) and
what ``get_relations`` / ``get_attributes`` listed for each argument: as in AgentBench,
``get_neighbors`` only follows a relation that ``get_relations`` listed for that same
argument, and ``argmax``/``argmin`` only rank by an attribute ``get_attributes`` listed.

Observations are AgentBench's texts: ``Observation: [r1, r2]`` for a listing,
``Observation: variable #k, which are instances of <type>`` for a new variable
(``which is a number`` for a count). A call that cannot run raises :class:`ToolFailure`,
whose ``text`` is AgentBench's message and ``issue`` says why (for ``info``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agentunit_gym.backends.sparql.base import ResultTooLargeError, SPARQLBackend
from agentunit_gym.domains.kg.program import (
    COUNT_TYPE,
    ENTITY_ID,
    HIDDEN_PROPERTIES,
    PROPERTY_NAME,
    Count,
    EntityRef,
    Intersection,
    Neighbors,
    Program,
    Superlative,
    expected_type_query,
)
from agentunit_gym.domains.kg.schema import ATTRIBUTES, RELATIONS
from agentunit_gym.errors import BackendError, BackendTimeoutError

MAX_ARGUMENT_CHARS = 200
"""An argument longer than this is refused before any lookup (and shown cut in messages)."""

GENERIC_TYPE = "common.topic"
"""The type reported when a store's schema does not say a relation's range."""


@dataclass(frozen=True)
class Variable:
    """A typed program: what ``#k`` stands for."""

    type: str
    program: Program


class ToolFailure(Exception):
    """A tool call that cannot run: an agent mistake, shown as ``text``."""

    def __init__(self, text: str, issue: str, *, detail: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.issue = issue
        self.detail = detail


@dataclass(frozen=True)
class Vocabulary:
    """Which properties are relations (with their ranges) and which are attributes.

    ``relations``/``attributes`` None means: ask the store (any Freebase property to an
    entity is a relation, its range from ``type.property.expected_type``; any property to
    a number is an attribute). That is how a user's Freebase endpoint runs.
    """

    relations: Mapping[str, str] | None
    attributes: frozenset[str] | None

    @classmethod
    def bundled(cls) -> Vocabulary:
        return cls({name: r.range for name, r in RELATIONS.items()}, frozenset(ATTRIBUTES))

    @classmethod
    def from_store(cls) -> Vocabulary:
        return cls(None, None)


@dataclass
class CallOutcome:
    """What a successful call produced."""

    observation: str
    variable: Variable | None = None
    listed: tuple[str, ...] = ()
    details: dict[str, object] = field(default_factory=dict)


def _shown(argument: str) -> str:
    return argument if len(argument) <= MAX_ARGUMENT_CHARS else argument[:MAX_ARGUMENT_CHARS] + "..."


def cannot_execute(tool: str, arguments: list[str]) -> str:
    """AgentBench's message for a call that failed."""
    shown = ", ".join(_shown(a) for a in arguments)
    if tool == "intersection":
        return (f"{tool}({shown}) cannot be executed. The two variables are not of the same type. "
                "You may further explore them by call get_relations")
    return f"{tool}({shown}) cannot be executed. You may make a mistake and need to fix it."


class KGSession:
    """The variables and listings of one episode.

    Args:
        backend: the store.
        entities: the task's topic entities, shown name -> id (the agent may use either).
        vocabulary: relations and attributes of the graph.
        timeout: seconds one query may run.
        max_results: rows a query may return (a larger answer set is cut, and says so).
    """

    def __init__(
        self,
        backend: SPARQLBackend,
        entities: Mapping[str, str],
        vocabulary: Vocabulary,
        *,
        timeout: float,
        max_results: int,
    ) -> None:
        self.backend = backend
        self.entities = dict(entities)
        self.vocabulary = vocabulary
        self.timeout = timeout
        self.max_results = max_results
        self.variables: list[Variable] = []
        self._relations: dict[Program, tuple[str, ...]] = {}
        self._attributes: dict[Program, tuple[str, ...]] = {}
        self._ranges: dict[str, str] = {}
        self._memo: dict[Program, frozenset[str]] = {}

    # ------------------------------------------------------------ the tools

    def call(self, tool: str, arguments: list[str]) -> CallOutcome:
        """Run one tool call with AgentBench's argument handling.

        Args:
            tool: one of the seven tool names.
            arguments: the arguments as the agent wrote them (``#0``, ``variable #1``, an
                entity name from the question, an entity id, a relation ...).

        Raises:
            ToolFailure: the call cannot run (AgentBench's message in ``text``).
        """
        for argument in arguments:
            if len(argument) > MAX_ARGUMENT_CHARS:
                raise ToolFailure(cannot_execute(tool, arguments), "argument_too_long")
        try:
            if tool == "get_relations":
                return self._get_relations(self._operand(arguments[0], tool, arguments), arguments)
            if tool == "get_neighbors":
                return self._get_neighbors(self._operand(arguments[0], tool, arguments), arguments[1], arguments)
            if tool == "intersection":
                left = self._variable(arguments[0], tool, arguments)
                right = self._variable(arguments[1], tool, arguments)
                if left.type != right.type:
                    raise ToolFailure(cannot_execute(tool, arguments), "type_mismatch")
                return self._new(Variable(left.type, Intersection(left.program, right.program)))
            if tool == "get_attributes":
                return self._get_attributes(self._variable(arguments[0], tool, arguments), arguments)
            if tool in ("argmax", "argmin"):
                variable = self._variable(arguments[0], tool, arguments)
                attribute = arguments[1]
                if attribute not in self._attributes.get(variable.program, ()):
                    raise ToolFailure(cannot_execute(tool, arguments), "attribute_not_listed")
                program = Superlative(variable.program, attribute, "max" if tool == "argmax" else "min")
                return self._new(Variable(variable.type, program))
            if tool == "count":
                variable = self._variable(arguments[0], tool, arguments)
                if isinstance(variable.program, Count):
                    raise ToolFailure(cannot_execute(tool, arguments), "not_a_set")
                return self._new(Variable(COUNT_TYPE, Count(variable.program)), number=True)
        except BackendTimeoutError as exc:
            raise ToolFailure(cannot_execute(tool, arguments), "query_timeout") from exc
        except BackendError as exc:
            issue = "result_too_large" if isinstance(exc, ResultTooLargeError) else "store_error"
            raise ToolFailure(cannot_execute(tool, arguments), issue, detail=str(exc)) from exc
        raise ToolFailure(cannot_execute(tool, arguments), "unknown_tool")

    def answer(self, variable: Variable) -> list[str]:
        """Evaluate a committed variable: its members (or its count, as one number), sorted.

        As AgentBench's executor does, the topic entities the program mentions are left out.

        Raises:
            BackendTimeoutError: the evaluation ran past the time limit.
            BackendError: the store refused a lookup, or a set grew past ``max_results``.
        """
        program = variable.program
        if isinstance(program, Count):
            return [str(len(self._visible(program.source)))]
        return sorted(self._visible(program))

    # ------------------------------------------------------------ evaluation

    def _visible(self, program: Program) -> frozenset[str]:
        """A program's members without its topic entities (what AgentBench's final query returns)."""
        if isinstance(program, EntityRef):
            return self._members(program)
        return self._members(program) - program.entities()

    def _members(self, program: Program) -> frozenset[str]:
        """A program's members, one lookup per step, memoised for the episode."""
        cached = self._memo.get(program)
        if cached is not None:
            return cached
        if isinstance(program, EntityRef):
            members = frozenset({program.id})
        elif isinstance(program, Neighbors):
            members = frozenset(self.backend.objects(self._members(program.source), program.relation,
                                                     timeout=self.timeout, limit=self.max_results))
        elif isinstance(program, Intersection):
            members = self._members(program.left) & self._members(program.right)
        elif isinstance(program, Superlative):
            values = self.backend.extremes(self._visible(program.source), program.attribute, program.direction,
                                           timeout=self.timeout, limit=self.max_results)
            if values:
                best = max(values.values()) if program.direction == "max" else min(values.values())
                members = frozenset(k for k, v in values.items() if v == best)
            else:
                members = frozenset()
        else:
            raise BackendError("a count is a number, not a set of entities.")
        self._memo[program] = members
        return members

    def variable_at(self, reference: str) -> Variable | None:
        """The variable ``#k`` names, None when there is none."""
        text = reference.replace("variable ", "").replace("Variable ", "").strip()
        if not text.startswith("#") or not text[1:].isdigit() or len(text) > 10:
            return None
        index = int(text[1:])
        return self.variables[index] if index < len(self.variables) else None

    # ------------------------------------------------------------- private

    def _operand(self, argument: str, tool: str, arguments: list[str]) -> Variable | str:
        """A variable, or an entity id (a name from the question is replaced by its id)."""
        text = argument.replace("variable ", "").replace("Variable ", "")
        if text.startswith("#"):
            return self._variable(text, tool, arguments)
        entity = self.entities.get(text, text)
        if not ENTITY_ID.fullmatch(entity):
            raise ToolFailure(cannot_execute(tool, arguments), "not_an_entity")
        return entity

    def _variable(self, argument: str, tool: str, arguments: list[str]) -> Variable:
        variable = self.variable_at(argument)
        if variable is None:
            named = argument.replace("variable ", "").strip().startswith("#")
            issue = "unknown_variable" if named else "not_a_variable"
            raise ToolFailure(cannot_execute(tool, arguments), issue)
        return variable

    def _get_relations(self, operand: Variable | str, arguments: list[str]) -> CallOutcome:
        program = EntityRef(operand) if isinstance(operand, str) else operand.program
        if isinstance(program, Count):
            raise ToolFailure(cannot_execute("get_relations", arguments), "not_a_set")
        listed = self._list(program, literal=False)
        self._relations[program] = listed
        return CallOutcome(f"Observation: [{', '.join(listed)}]", listed=listed)

    def _get_neighbors(self, operand: Variable | str, relation: str, arguments: list[str]) -> CallOutcome:
        program = EntityRef(operand) if isinstance(operand, str) else operand.program
        if relation not in self._relations.get(program, ()):
            raise ToolFailure(cannot_execute("get_neighbors", arguments), "relation_not_listed")
        return self._new(Variable(self._range(relation), Neighbors(program, relation)))

    def _get_attributes(self, variable: Variable, arguments: list[str]) -> CallOutcome:
        if isinstance(variable.program, Count):
            raise ToolFailure(cannot_execute("get_attributes", arguments), "not_a_set")
        listed = self._list(variable.program, literal=True)
        self._attributes[variable.program] = listed
        return CallOutcome(f"Observation: [{', '.join(listed)}]", listed=listed)

    def _list(self, program: Program, *, literal: bool) -> tuple[str, ...]:
        found = self.backend.out_predicates(self._visible(program), literal=literal,
                                            timeout=self.timeout, limit=self.max_results)
        known = self.vocabulary.attributes if literal else self.vocabulary.relations
        names = {p for p in found if PROPERTY_NAME.fullmatch(p) and p not in HIDDEN_PROPERTIES}
        if known is not None:
            names &= set(known)
        return tuple(sorted(names))

    def _range(self, relation: str) -> str:
        known = self.vocabulary.relations
        if known is not None:
            return known.get(relation, GENERIC_TYPE)
        if relation not in self._ranges:
            rows = self.backend.select(expected_type_query(relation), timeout=self.timeout, limit=1).column(0)
            self._ranges[relation] = rows[0] if rows and PROPERTY_NAME.fullmatch(rows[0]) else GENERIC_TYPE
        return self._ranges[relation]

    def _new(self, variable: Variable, *, number: bool = False) -> CallOutcome:
        index = len(self.variables)
        self.variables.append(variable)
        what = "which is a number" if number else f"which are instances of {variable.type}"
        return CallOutcome(f"Observation: variable #{index}, {what}", variable=variable,
                           details={"variable": f"#{index}", "type": variable.type,
                                    "program": variable.program.s_expression()})
