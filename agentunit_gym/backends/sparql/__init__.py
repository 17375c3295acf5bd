"""SPARQL backends for the KG env: an embedded pyoxigraph store, or any SPARQL 1.1 HTTP endpoint."""

from agentunit_gym.backends.sparql.base import SelectResult, SPARQLBackend

__all__ = ["SPARQLBackend", "SelectResult"]
