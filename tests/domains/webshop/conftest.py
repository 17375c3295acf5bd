"""Fixtures of the WebShop tests: a small generated catalog (built once per session), goals over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.engine import EmbeddedShopBackend, Shop
from agentunit_gym.backends.shop.factory import shared_shop
from agentunit_gym.domains.webshop.goals import generate_goals
from agentunit_gym.domains.webshop.task import WebShopTask

SMALL_SIZE = 3000
SMALL_SEED = 11


@pytest.fixture(scope="session")
def small_catalog() -> GeneratedCatalog:
    return GeneratedCatalog(SMALL_SIZE, SMALL_SEED)


@pytest.fixture(scope="session")
def small_shop(small_catalog: GeneratedCatalog) -> Shop:
    return shared_shop(small_catalog)


@pytest.fixture(scope="session")
def small_goals(small_shop: Shop) -> list[WebShopTask]:
    return generate_goals(small_shop, 40, seed=3)


@pytest.fixture
def shop_backend(small_shop: Shop) -> Iterator[EmbeddedShopBackend]:
    backend = EmbeddedShopBackend(small_shop)
    yield backend
    backend.close()
