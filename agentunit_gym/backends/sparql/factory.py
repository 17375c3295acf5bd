"""Pick and open a SPARQL backend: ``embedded`` (default), ``sparql`` (an HTTP endpoint), or ``auto``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from agentunit_gym.backends.sparql.base import SPARQLBackend
from agentunit_gym.errors import ConfigError

log = logging.getLogger(__name__)

KINDS = ("embedded", "sparql")
"""Backend names, embedded default first."""


def open_sparql_backend(kind: str, *, endpoint: str | None, store: Callable[[], Path]) -> SPARQLBackend:
    """Open a backend.

    Args:
        kind: ``auto`` (``sparql`` when an endpoint is given, else ``embedded``), ``embedded`` or ``sparql``.
        endpoint: the SPARQL 1.1 query URL; ``sparql`` without one starts a ``kg`` container.
        store: builds or finds the on-disk store for ``embedded`` and returns its path.

    Raises:
        ConfigError: an unknown kind, an endpoint with ``embedded``.
        BackendUnavailableError: the store cannot be opened, or (``sparql`` without an
            endpoint) no Docker daemon answers.
    """
    if kind not in ("auto", *KINDS):
        raise ConfigError(f"backend must be 'auto', 'embedded' or 'sparql', got {kind!r}.")
    if kind == "auto":
        kind = "sparql" if endpoint else "embedded"
        log.debug("KG backend auto -> %s", kind)
    if kind == "sparql":
        if not endpoint:
            # No endpoint given: our own server, a kg container holding the bundled graph.
            from agentunit_gym.backends.sparql.container import ContainerSPARQL

            return ContainerSPARQL()
        from agentunit_gym.backends.sparql.http import HTTPSPARQL

        return HTTPSPARQL(endpoint)
    if endpoint:
        raise ConfigError("endpoint is for the 'sparql' backend; the embedded store takes none.")
    from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL

    return EmbeddedSPARQL(store())
