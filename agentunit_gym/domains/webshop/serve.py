"""Play a goal in a browser: the shop server with the suite's goals, for people.

``agentunit-gym webshop serve --goal webshop-0042`` opens the shop (the generated 100k
catalog, index from the cache) on a loopback port, prints the URL of that goal, and
serves until interrupted. The page is the same one the text mode renders (same texts,
same order), with a search box, links for buttons and products and option choices; after
Buy Now it shows WebShop's reward.
"""

from __future__ import annotations

from urllib.parse import quote

from agentunit_gym.backends.shop.catalog import DEFAULT_SEED, DEFAULT_SIZE, GeneratedCatalog
from agentunit_gym.backends.shop.factory import shared_shop
from agentunit_gym.backends.shop.server import ShopServer, ShopService
from agentunit_gym.domains.webshop.domain import DOMAIN
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.errors import TaskNotFoundError


def open_play_server(goal_id: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
                     catalog_size: int | None = None, catalog_seed: int | None = None) -> tuple[ShopServer, str]:
    """Start (in a background thread) a shop server holding the bundled goals.

    Returns:
        The running server and the URL to open: the goal's page, or the list of goals.

    Raises:
        TaskNotFoundError: no bundled goal has that id.
    """
    goals = {t.id: t.goal() for t in DOMAIN.bundled_tasks() if isinstance(t, WebShopTask)}
    if goal_id is not None and goal_id not in goals:
        raise TaskNotFoundError(
            f"no bundled WebShop goal {goal_id!r}; see `agentunit-gym tasks list --domain webshop`.")
    catalog = GeneratedCatalog(catalog_size or DEFAULT_SIZE, catalog_seed or DEFAULT_SEED)
    server = ShopServer(ShopService(shared_shop(catalog), goals), host=host, port=port).start()
    url = f"{server.url}/play/{quote(goal_id)}" if goal_id is not None else f"{server.url}/"
    return server, url
