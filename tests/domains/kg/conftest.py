from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL

from .graphs import freebase_graph, open_graph, small_graph


@pytest.fixture(scope="session")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedSPARQL]:
    store = open_graph(small_graph(), tmp_path_factory.mktemp("kg-cache"))
    yield store
    store.close()


@pytest.fixture(scope="session")
def freebase_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedSPARQL]:
    store = open_graph(freebase_graph(), tmp_path_factory.mktemp("kg-fb-cache"))
    yield store
    store.close()
