"""The SPARQL backend interface the KG env uses; ``embedded`` and ``sparql`` (HTTP) implement it.

A backend answers read-only ``SELECT`` queries over one graph, with a time limit and a
result cap on every query. Terms come back as plain strings: an IRI in Freebase's namespace
as its local name (``m.country_fr``, ``location.country.capital``), any other IRI whole, a
literal as its lexical form. That is the form AgentBench's executor returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from agentunit_gym.errors import ConfigError

FREEBASE_NS = "http://rdf.freebase.com/ns/"


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

    @abstractmethod
    def close(self) -> None:
        """Release the store. Idempotent."""

    def __enter__(self) -> SPARQLBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
