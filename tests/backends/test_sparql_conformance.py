"""The same SPARQL semantics on every backend: the embedded store, Oxigraph's HTTP server over the
same store (no Docker), and the kg container. All hold the bundled graph."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sparql.base import SPARQLBackend, check_query_limits
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.backends.sparql.factory import open_sparql_backend
from agentunit_gym.backends.sparql.http import HTTPSPARQL
from agentunit_gym.domains.kg.store import bundled_store
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, ConfigError
from tests.backends.oxigraph_server import OxigraphServer

NS = "http://rdf.freebase.com/ns/"
FRANCE_NEIGHBOURS = {"m.country_ad", "m.country_be", "m.country_ch", "m.country_de", "m.country_es",
                     "m.country_it", "m.country_lu", "m.country_mc"}


class SPARQLConformance:
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SPARQLBackend]:
        raise NotImplementedError

    def test_select_gives_local_names_and_literals(self, backend: SPARQLBackend) -> None:
        result = backend.select(f"SELECT ?x WHERE {{ <{NS}m.country_fr> <{NS}location.country.adjoins> ?x }}",
                                timeout=10, limit=100)
        assert result.variables == ("x",) and set(result.column(0)) == FRANCE_NEIGHBOURS and not result.truncated
        names = backend.select(f"SELECT ?n WHERE {{ <{NS}m.country_ci> <{NS}type.object.name> ?n }}",
                               timeout=10, limit=10)
        assert names.column(0) == ["Ivory Coast"]

    def test_unicode_round_trips(self, backend: SPARQLBackend) -> None:
        query = (f"SELECT ?n WHERE {{ ?c <{NS}type.object.name> ?n . FILTER(STR(?n) = 'Angermünde') }}")
        assert backend.select(query, timeout=10, limit=10).column(0) == ["Angermünde"]

    def test_the_cap_keeps_the_first_rows(self, backend: SPARQLBackend) -> None:
        result = backend.select(f"SELECT ?c WHERE {{ ?c <{NS}type.object.type> <{NS}location.citytown> }}",
                                timeout=10, limit=5)
        assert len(result.rows) == 5 and result.truncated

    def test_set_lookups(self, backend: SPARQLBackend) -> None:
        assert backend.objects(["m.country_fr", "m.country_lu"], "location.country.adjoins", timeout=10,
                               limit=100) == FRANCE_NEIGHBOURS | {"m.country_fr"}
        relations = backend.out_predicates(["m.country_fr"], literal=False, timeout=10, limit=100)
        assert "location.country.adjoins" in relations and "type.object.name" not in relations
        areas = backend.extremes(["m.country_fr", "m.country_lu"], "location.country.area", "max", timeout=10,
                                 limit=10)
        assert areas == {"m.country_fr": (0, 547030.0), "m.country_lu": (0, 2586.0)}

    def test_a_bad_query_is_a_backend_error(self, backend: SPARQLBackend) -> None:
        with pytest.raises(BackendError):
            backend.select("SELECT ?x WHERE { ?x", timeout=10, limit=10)

    def test_updates_are_refused_and_change_nothing(self, backend: SPARQLBackend) -> None:
        before = backend.triple_count()
        with pytest.raises(BackendError):
            backend.select(f"INSERT DATA {{ <{NS}m.x> <{NS}m.y> <{NS}m.z> }}", timeout=10, limit=10)
        assert backend.triple_count() == before

    def test_a_slow_query_times_out(self, backend: SPARQLBackend) -> None:
        slow = (f"SELECT ?a ?b WHERE {{ ?a <{NS}location.citytown.population> ?x . "
                f"?b <{NS}location.citytown.population> ?y }}")
        with pytest.raises(BackendTimeoutError):
            backend.select(slow, timeout=0.2, limit=10**9)
        # The backend still answers afterwards.
        assert backend.select("SELECT (1 AS ?one) WHERE {}", timeout=10, limit=1).column(0) == ["1"]


class TestEmbedded(SPARQLConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SPARQLBackend]:
        with EmbeddedSPARQL(bundled_store()) as store:
            yield store


class TestOxigraphServer(SPARQLConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SPARQLBackend]:
        with OxigraphServer(bundled_store()) as server, HTTPSPARQL(server.endpoint) as http:
            yield http


@pytest.mark.docker
class TestKGContainer(SPARQLConformance):
    """``backend="sparql"`` without an endpoint: a kg container of the backend's own."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SPARQLBackend]:
        sparql = open_sparql_backend("sparql", endpoint=None, store=bundled_store)
        yield sparql
        sparql.close()


def test_factory_choices(tmp_path: object) -> None:
    with pytest.raises(ConfigError):
        open_sparql_backend("virtuoso", endpoint=None, store=bundled_store)
    with pytest.raises(ConfigError):
        open_sparql_backend("embedded", endpoint="http://127.0.0.1:1/query", store=bundled_store)
    auto = open_sparql_backend("auto", endpoint=None, store=bundled_store)
    assert auto.kind == "embedded"
    auto.close()
    remote = open_sparql_backend("auto", endpoint="http://127.0.0.1:9/query", store=bundled_store)
    assert remote.kind == "sparql"
    with pytest.raises(BackendUnavailableError):  # nothing listens on the discard port
        remote.select("SELECT * WHERE { ?s ?p ?o }", timeout=2, limit=1)
    remote.close()
    with pytest.raises(ConfigError):
        HTTPSPARQL("ftp://example/sparql")
    with pytest.raises(ConfigError):
        check_query_limits(0, 1)
