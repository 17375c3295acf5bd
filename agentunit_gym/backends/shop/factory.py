"""Pick and open a shop backend by name: ``auto``, ``embedded`` or ``server``.

Shops (a catalog and its index) are opened once per process and shared: every env and
every server session of one process reads the same memory-mapped index.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from agentunit_gym.backends.shop.base import ShopBackend
from agentunit_gym.backends.shop.catalog import DEFAULT_SEED, DEFAULT_SIZE, Catalog, GeneratedCatalog
from agentunit_gym.backends.shop.engine import Shop
from agentunit_gym.errors import ConfigError

logger = logging.getLogger("agentunit_gym")

KINDS = ("auto", "embedded", "server")

_lock = threading.Lock()
_shops: dict[str, Shop] = {}


def open_catalog(*, catalog_size: int | None = None, catalog_seed: int | None = None,
                 webshop_data: str | Path | None = None) -> Catalog:
    """The generated catalog (default 100k products, seed 0) or WebShop's own files.

    Raises:
        ConfigError: both a generated catalog and WebShop files are asked for.
    """
    if webshop_data is not None:
        if catalog_size is not None or catalog_seed is not None:
            raise ConfigError("give webshop_data or catalog_size/catalog_seed, not both.")
        from agentunit_gym.backends.shop.files import load_webshop_catalog

        loaded: Catalog = load_webshop_catalog(webshop_data)
        return loaded
    return GeneratedCatalog(catalog_size or DEFAULT_SIZE, DEFAULT_SEED if catalog_seed is None else catalog_seed)


def shared_shop(catalog: Catalog, **options: Any) -> Shop:
    """The process's shop over ``catalog`` (opened, and its index built, on first use)."""
    with _lock:
        shop = _shops.get(catalog.key)
        if shop is None:
            shop = _shops[catalog.key] = Shop.open(catalog, **options)
        return shop


def open_shop_backend(kind: str = "auto", *, url: str | None = None, catalog_size: int | None = None,
                      catalog_seed: int | None = None, webshop_data: str | Path | None = None,
                      catalog: Catalog | None = None, **options: Any) -> ShopBackend:
    """Open the shop backend ``kind``.

    ``auto`` is ``server`` when a ``url`` is given, else ``embedded`` (the shop needs no
    daemon, so there is nothing to prefer a container for).

    Args:
        kind: ``"auto"``, ``"embedded"`` or ``"server"``.
        url: an existing shop server; for ``server`` without it, a container is started.
        catalog_size, catalog_seed, webshop_data: the catalog (see :func:`open_catalog`).
        catalog: an already loaded catalog instead (embedded only).
        **options: ``cache_root`` and ``progress`` (embedded), container options (server).

    Raises:
        ConfigError: an unknown kind.
        BackendUnavailableError: the server cannot be started or reached.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown shop backend {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "auto":
        kind = "server" if url is not None else "embedded"
        logger.info("Shop backend: %s", kind)
    if kind == "embedded":
        if url is not None:
            raise ConfigError("the embedded shop takes no url; use backend='server'.")
        from agentunit_gym.backends.shop.engine import EmbeddedShopBackend

        if catalog is None:
            catalog = open_catalog(catalog_size=catalog_size, catalog_seed=catalog_seed, webshop_data=webshop_data)
        return EmbeddedShopBackend(shared_shop(catalog, **options))
    from agentunit_gym.backends.shop.client import ServerShopBackend

    if url is not None:
        server: ShopBackend = ServerShopBackend(url, **options)
        return server
    if catalog is not None or webshop_data is not None:
        raise ConfigError("the shop container serves generated catalogs; for WebShop's files run a server "
                          "yourself (python -m agentunit_gym.backends.shop.server) and pass its url.")
    started: ShopBackend = ServerShopBackend.start_container(catalog_size=catalog_size, catalog_seed=catalog_seed,
                                                             **options)
    return started
