"""The shop engine in process (the ``embedded`` backend, and what the shop server runs).

Pages and moves follow WebShop's text environment:

- search page: ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search``; the only
  page that lists a search box, but a search is taken from any page, as WebShop's text env
  takes it. ``click[search]`` is not a move (WebShop excludes it).
- results: ``Back to Search``, ``Page N (Total results: T)``, ``< Prev`` (after page 1),
  ``Next >`` (on every results page, as WebShop's templates of AgentBench's time show it:
  past the last page, a page with no products), then ASIN, title and price of up to 10
  products.
- item: ``Back to Search``, ``< Prev`` (back to the results page), each option group's
  name and values, title, ``Price: ...``, ``Rating: N.A.``, ``Description``, ``Features``,
  ``Reviews``, ``Buy Now``. Clicking a value chooses it for its group. The rating is always
  ``N.A.``: AgentBench's copy of WebShop loads no reviews or ratings, so its item pages say so.
- description / features / reviews: ``Back to Search``, ``< Prev`` (back to the item). The
  reviews page shows nothing more: AgentBench's copy of WebShop loads no reviews, and the
  template of its time prints none for an empty list (reviews a catalog holds are never shown).
- ``Buy Now``: the done page, with WebShop's reward.

Clickables are listed lowercased, as WebShop's text env lists them, and clicks compare
case-insensitively.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

from agentunit_gym.backends.shop.base import MoveResult, PageView, ShopBackend, ShopSession
from agentunit_gym.backends.shop.catalog import Catalog, GeneratedCatalog, Product
from agentunit_gym.backends.shop.reward import GoalSpec, compute_reward
from agentunit_gym.backends.shop.search import SEARCH_RETURN_N, Progress, SearchIndex

PRODUCT_WINDOW = 10
SEP = " [SEP] "
BUY_NOW = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
SUB_PAGES = ("Description", "Features", "Reviews")
RATING_SHOWN = "N.A."
"""The item page's rating: AgentBench's WebShop loads no ratings (nor reviews), so it shows this."""


class Shop:
    """A catalog and its search index: what every session reads. Thread-safe to share."""

    def __init__(self, catalog: Catalog, index: SearchIndex) -> None:
        self.catalog = catalog
        self.index = index
        self._lock = threading.Lock()

    @classmethod
    def open(cls, catalog: Catalog | None = None, *, cache_root: Path | None = None,
             progress: Progress | None = None) -> Shop:
        """The shop over ``catalog`` (default: the 100k generated one), index built on first use."""
        catalog = catalog if catalog is not None else GeneratedCatalog()
        return cls(catalog, SearchIndex.open(catalog, root=cache_root, progress=progress))

    def search(self, keywords: str) -> list[int]:
        """Catalog positions of the hits (products are made only when a page shows them)."""
        with self._lock:  # bm25s' scorer is not documented as thread-safe
            return self.index.search(keywords, SEARCH_RETURN_N)


class EmbeddedSession(ShopSession):
    """WebShop's browser state machine for one goal."""

    def __init__(self, shop: Shop, goal: GoalSpec) -> None:
        self._shop = shop
        self.goal = goal
        self._page = "search"
        self._keywords: str | None = None
        self._results: list[int] = []
        self._page_number = 1
        self._product: Product | None = None
        self._options: dict[str, str] = {}
        self._reward: dict[str, Any] | None = None
        self._reward_value: float | None = None
        self._closed = False
        self._view = self._render()

    @property
    def view(self) -> PageView:
        return self._view

    def close(self) -> None:
        self._closed = True

    # ------------------------------------------------------------- moves

    def search(self, keywords: str) -> MoveResult:
        if self._page == "done":
            return self._refuse("the purchase is finished; nothing can be searched.")
        words = " ".join(keywords.lower().split())
        if not words:
            return self._refuse("search needs keywords, e.g. search[red cotton t-shirt].")
        self._keywords = words
        self._results = self._shop.search(words)
        self._page_number = 1
        self._product, self._options = None, {}  # WebShop's search clears the item and its options
        return self._go("results")

    def click(self, value: str) -> MoveResult:
        wanted = " ".join(value.lower().split())
        if self._page == "done":
            return self._refuse("the purchase is finished; nothing can be clicked.")
        if wanted == "search" or wanted not in self._view.clickables:
            return self._refuse(f"{value!r} cannot be clicked on this page.")
        if wanted == BACK_TO_SEARCH.lower():
            self._keywords, self._results, self._product, self._options = None, [], None, {}
            return self._go("search")
        if self._page == "results":
            if wanted == NEXT_PAGE.lower():
                self._page_number += 1
                return self._go("results")
            if wanted == PREV_PAGE.lower():
                self._page_number -= 1
                return self._go("results")
            self._product = next(p for p in self._shown() if p.asin.lower() == wanted)
            self._options = {}
            return self._go("item")
        if self._page == "item":
            if wanted == PREV_PAGE.lower():
                self._product, self._options = None, {}
                return self._go("results")
            if wanted == BUY_NOW.lower():
                return self._buy()
            for sub in SUB_PAGES:
                if wanted == sub.lower():
                    return self._go(sub.lower())
            assert self._product is not None
            group = [name for name, values in self._product.options.items() if wanted in values][-1]
            self._options[group] = wanted
            return self._go("item")
        # a sub page: only '< Prev' is left (Back to Search was handled above)
        return self._go("item")

    def _shown(self) -> list[Product]:
        start = (self._page_number - 1) * PRODUCT_WINDOW
        return [self._shop.catalog.product(i) for i in self._results[start:start + PRODUCT_WINDOW]]

    def _buy(self) -> MoveResult:
        assert self._product is not None
        breakdown = compute_reward(self._product, self.goal, dict(self._options))
        self._reward = breakdown.components()
        self._reward_value = breakdown.reward
        return self._go("done")

    def _go(self, page: str) -> MoveResult:
        self._page = page
        self._view = self._render()
        return MoveResult(self._view)

    def _refuse(self, reason: str) -> MoveResult:
        return MoveResult(self._view, refused=reason)

    # ------------------------------------------------------------ pages

    def _render(self) -> PageView:
        instruction = ["Instruction:", self.goal.instruction]
        page = self._page
        if page == "search":
            return PageView("search", SEP.join(["WebShop", *instruction, "Search"]), True, ("search",),
                            keywords=None, options={})
        if page == "results":
            total = len(self._results)
            shown = self._shown()
            texts = [*instruction, BACK_TO_SEARCH, f"Page {self._page_number} (Total results: {total})"]
            buttons = [BACK_TO_SEARCH]
            if self._page_number > 1:
                buttons.append(PREV_PAGE)
            buttons.append(NEXT_PAGE)
            texts += buttons[1:]
            for hit in shown:
                texts += [hit.asin, hit.title, hit.price_tag]
            clickables = [b.lower() for b in buttons] + [p.asin.lower() for p in shown]
            return self._make("results", texts, clickables)
        if page == "done":
            value = self._reward_value if self._reward_value is not None else 0.0
            text = SEP.join(["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", f"{value}"])
            return PageView("done", text, False, (), keywords=self._keywords, asin=self._product.asin
                            if self._product else None, options=dict(self._options), reward=value,
                            reward_components=self._reward)
        product = self._product
        assert product is not None
        texts = [*instruction, BACK_TO_SEARCH, PREV_PAGE]
        if page == "item":
            values: list[str] = []
            for name, group in product.options.items():
                texts += [name, *group]
                values += group
            texts += [product.title, f"Price: {product.price_tag}", f"Rating: {RATING_SHOWN}",
                      *SUB_PAGES, BUY_NOW]
            buttons = [BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES, BUY_NOW]
            clickables = list(dict.fromkeys([b.lower() for b in buttons] + values))
            return self._make("item", texts, clickables)
        if page == "description":
            texts.append(product.description)
        elif page == "features":
            texts += list(product.bullet_points)
        return self._make(page, texts, [BACK_TO_SEARCH.lower(), PREV_PAGE.lower()])

    def _make(self, page: str, texts: list[str], clickables: list[str]) -> PageView:
        return PageView(page, SEP.join(texts), False, tuple(clickables), keywords=self._keywords,
                        page_number=self._page_number, asin=self._product.asin if self._product else None,
                        options=dict(self._options))


class EmbeddedShopBackend(ShopBackend):
    """The shop in this process.

    Args:
        shop: an open :class:`Shop` to share (e.g. between envs of one process); else one is
            opened over ``catalog`` (default: the 100k generated catalog).
    """

    kind = "embedded"
    _ids = itertools.count()

    def __init__(self, shop: Shop | None = None, *, catalog: Catalog | None = None,
                 cache_root: Path | None = None, progress: Progress | None = None) -> None:
        self.shop = shop if shop is not None else Shop.open(catalog, cache_root=cache_root, progress=progress)

    def open_session(self, goal: GoalSpec) -> EmbeddedSession:
        return EmbeddedSession(self.shop, goal)

    def product_count(self) -> int:
        return len(self.shop.catalog)

    def close(self) -> None:
        pass
