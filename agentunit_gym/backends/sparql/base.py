"""The SPARQL backend interface the KG env uses; ``embedded`` and ``sparql`` (HTTP) implement it.

A backend answers read-only ``SELECT`` queries over one graph, with a time limit and a
result cap on every query. Terms come back as plain strings: an IRI in Freebase's namespace
as its local name (``m.country_fr``, ``location.country.capital``), any other IRI whole, a
literal as its lexical form. That is the form AgentBench's executor returns.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from agentunit_gym.errors import BackendError, BackendTimeoutError, ConfigError

FREEBASE_NS = "http://rdf.freebase.com/ns/"

CHUNK = 1000
"""Subjects per query in the set-level lookups (bounds each query's cost; the deadline is checked between)."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")


XSD_NS = "http://www.w3.org/2001/XMLSchema#"

Direction = Literal["max", "min"]
OrderKey = tuple[float, ...]
"""``(0, number)`` or ``(1, year, month, day, seconds)``: comparable within one kind."""

_NUMERIC = frozenset(f"{XSD_NS}{name}" for name in (
    "integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt",
    "unsignedShort", "unsignedByte"))
_DATES = frozenset(f"{XSD_NS}{name}" for name in ("date", "dateTime", "gYear", "gYearMonth"))
_DATE = re.compile(r"^(-?\d{4,})(?:-(\d{2}))?(?:-(\d{2}))?(?:T(\d{2}):(\d{2}):(\d{2}(?:\.\d+)?))?")


def order_key(value: str, datatype: str) -> OrderKey | None:
    """How a literal ranks in a superlative; None for a literal that does not rank (text, bad lexical form).

    >>> order_key("12.5", "http://www.w3.org/2001/XMLSchema#double")
    (0, 12.5)
    >>> order_key("1969-07-20", "http://www.w3.org/2001/XMLSchema#date")
    (1, 1969.0, 7.0, 20.0, 0.0)
    >>> order_key("1969", "http://www.w3.org/2001/XMLSchema#gYear") < order_key("1969-02", XSD_NS + "gYearMonth")
    True
    """
    if datatype in _NUMERIC:
        try:
            number = float(value)
        except ValueError:
            return None
        return None if number != number else (0, number)  # NaN does not rank
    if datatype in _DATES:
        match = _DATE.match(value.strip())
        if match is None:
            return None
        year, month, day, hours, minutes, seconds = match.groups()
        clock = int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
        return (1, float(year), float(month or 1), float(day or 1), clock)
    return None


class ResultTooLargeError(BackendError):
    """A lookup returned more results than its cap."""


class UnsafeTermError(ValueError):
    """A name that may not go into a query (names are validated on entry; this is the last guard)."""


def fb_iri(name: str) -> str:
    """The full IRI term of a Freebase-namespace name (an entity id or a dotted property).

    Only letters, digits, ``_`` and ``.`` pass, so nothing can close the term or the query.

    Raises:
        UnsafeTermError: any other character.
    """
    if not _SAFE_NAME.fullmatch(name):
        raise UnsafeTermError(f"not a valid entity id or property name: {name[:80]!r}")
    return f"<{FREEBASE_NS}{name}>"


@dataclass(frozen=True)
class SelectResult:
    """The rows of one ``SELECT``; each row holds one string (or None: unbound) per variable."""

    variables: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]
    truncated: bool = False
    """More rows than the cap were returned; only the first ``limit`` are kept."""
    duration_s: float = 0.0

    def column(self, index: int = 0) -> list[str]:
        """One variable's bound values, in row order."""
        return [row[index] for row in self.rows if row[index] is not None]  # type: ignore[misc]


def local_name(value: str) -> str:
    """A Freebase IRI's local name, or the value unchanged."""
    return value[len(FREEBASE_NS):] if value.startswith(FREEBASE_NS) else value


def check_query_limits(timeout: float, limit: int) -> None:
    """Refuse a time limit or a cap no backend can honour.

    Raises:
        ConfigError: ``timeout`` <= 0 or ``limit`` < 1.
    """
    if timeout <= 0 or limit < 1:
        raise ConfigError(f"timeout must be > 0 and limit >= 1 (got {timeout!r}, {limit!r}).")


class SPARQLBackend(ABC):
    """One read-only SPARQL store for one env process."""

    kind: ClassVar[str]
    """``embedded`` or ``sparql``."""

    @abstractmethod
    def select(self, query: str, *, timeout: float, limit: int) -> SelectResult:
        """Run a ``SELECT`` query.

        Args:
            query: the query text (built by the env from validated terms, never agent text).
            timeout: seconds the query may run.
            limit: rows kept; more set ``truncated``.

        Raises:
            BackendTimeoutError: the query ran past ``timeout``.
            BackendError: the store refused the query (a bug in the query builder, or a
                store that does not speak SPARQL 1.1).
            BackendUnavailableError: the store cannot be reached.
        """

    @abstractmethod
    def triple_count(self) -> int:
        """How many triples the default graph holds (to check a store is the one expected)."""

    # --------------------------------------------- set-level lookups (the KG tools' steps)

    def objects(self, subjects: Iterable[str], predicate: str, *, timeout: float, limit: int) -> set[str]:
        """Every IRI object of ``predicate`` leaving any of ``subjects`` (local names).

        Raises:
            BackendTimeoutError: the lookups ran past ``timeout`` in total.
            BackendError: a result held more than ``limit`` rows.
        """
        pattern = f"?s {fb_iri(predicate)} ?o . FILTER(isIRI(?o))"
        return self._chunked(subjects, "?o", pattern, timeout, limit)

    def out_predicates(self, subjects: Iterable[str], *, literal: bool, timeout: float, limit: int) -> set[str]:
        """Freebase-namespace predicates leaving ``subjects``, towards literals or towards IRIs.

        Raises:
            BackendTimeoutError: past ``timeout``. BackendError: more than ``limit`` rows.
        """
        kind = "isLiteral(?o)" if literal else "isIRI(?o)"
        pattern = f"?s ?p ?o . FILTER({kind}) FILTER(STRSTARTS(STR(?p), '{FREEBASE_NS}'))"
        return self._chunked(subjects, "?p", pattern, timeout, limit)

    def extremes(self, subjects: Iterable[str], predicate: str, direction: Direction, *, timeout: float,
                 limit: int) -> dict[str, OrderKey]:
        """Each subject's largest (``max``) or smallest (``min``) value of ``predicate``, as an order key.

        As AgentBench's ``ORDER BY [DESC](?sk0) LIMIT 1`` ranks them: numbers by value, dates
        (``xsd:date``, ``dateTime``, ``gYear``, ``gYearMonth``) in time order, a year alone at its
        first day. Where a predicate has numbers and dates, only the numbers are ranked; other
        literals are not ranked.

        Raises:
            BackendTimeoutError: past ``timeout``. BackendError: more than ``limit`` rows.
        """
        deadline = time.monotonic() + timeout
        numbers: dict[str, OrderKey] = {}
        dates: dict[str, OrderKey] = {}
        pick = max if direction == "max" else min
        for chunk in _chunks(subjects):
            query = (f"SELECT ?s ?v (DATATYPE(?v) AS ?t) WHERE {{ VALUES ?s {{ {' '.join(fb_iri(s) for s in chunk)} }} "
                     f"?s {fb_iri(predicate)} ?v . FILTER(isLiteral(?v)) }}")
            for subject, value, datatype in self.select(query, timeout=_left(deadline, timeout), limit=limit).rows:
                if subject is None or value is None or datatype is None:
                    continue
                key = order_key(value, datatype)
                if key is None:
                    continue
                found = numbers if key[0] == 0 else dates
                found[subject] = pick(key, found.get(subject, key))
        return numbers or dates

    def _chunked(self, subjects: Iterable[str], var: str, pattern: str, timeout: float, limit: int) -> set[str]:
        deadline = time.monotonic() + timeout
        found: set[str] = set()
        for chunk in _chunks(subjects):
            query = (f"SELECT DISTINCT {var} WHERE {{ VALUES ?s {{ {' '.join(fb_iri(s) for s in chunk)} }} "
                     f"{pattern} }} LIMIT {limit + 1}")
            result = self.select(query, timeout=_left(deadline, timeout), limit=limit)
            found.update(result.column(0))
            if result.truncated or len(found) > limit:
                raise ResultTooLargeError(f"a lookup returned more than {limit} results.")
        return found

    @abstractmethod
    def close(self) -> None:
        """Release the store. Idempotent."""

    def __enter__(self) -> SPARQLBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(subjects: Iterable[str]) -> Iterable[list[str]]:
    batch: list[str] = []
    for subject in sorted(set(subjects)):
        batch.append(subject)
        if len(batch) >= CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def _left(deadline: float, timeout: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise BackendTimeoutError(f"the lookups did not finish within {timeout:g} s.")
    return left
