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
from typing import ClassVar

from agentunit_gym.errors import BackendError, BackendTimeoutError, ConfigError

FREEBASE_NS = "http://rdf.freebase.com/ns/"

CHUNK = 1000
"""Subjects per query in the set-level lookups (bounds each query's cost; the deadline is checked between)."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$")


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

    def numbers(self, subjects: Iterable[str], predicate: str, *, timeout: float, limit: int) -> dict[str, float]:
        """The numeric values of ``predicate`` on ``subjects`` (the largest when a subject has several).

        Raises:
            BackendTimeoutError: past ``timeout``. BackendError: more than ``limit`` rows.
        """
        deadline = time.monotonic() + timeout
        found: dict[str, float] = {}
        for chunk in _chunks(subjects):
            query = (f"SELECT ?s ?v WHERE {{ VALUES ?s {{ {' '.join(fb_iri(s) for s in chunk)} }} "
                     f"?s {fb_iri(predicate)} ?v . FILTER(isNumeric(?v)) }}")
            for subject, value in self.select(query, timeout=_left(deadline, timeout), limit=limit).rows:
                if subject is None or value is None:
                    continue
                try:
                    number = float(value)
                except ValueError:
                    continue
                found[subject] = max(number, found.get(subject, number))
        return found

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
