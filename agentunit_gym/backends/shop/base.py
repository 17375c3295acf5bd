"""The shop engine interface the WebShop env uses; ``embedded`` and ``server`` implement it.

A :class:`ShopBackend` is one shop (a catalog and its search index) for one env process.
Each episode opens a :class:`ShopSession` for a goal; the session is WebShop's browser
state: the page shown, the search keywords and result page, the product open, the
options chosen. ``search`` and ``click`` move it; a move the page does not offer is
refused with a reason and leaves the page as it was. After ``Buy Now`` the view is the
done page and carries the reward and its parts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from agentunit_gym.backends.shop.reward import GoalSpec

PAGES = ("search", "results", "item", "description", "features", "reviews", "done")


@dataclass(frozen=True)
class PageView:
    """What the shopper sees: the page in WebShop's text mode and what can be done on it."""

    page: str
    """One of :data:`PAGES`."""
    text: str
    """The page in WebShop's simple text mode (visible texts joined by `` [SEP] ``)."""
    has_search_bar: bool
    clickables: tuple[str, ...]
    """What ``click`` accepts here, lowercased as WebShop lists them."""
    keywords: str | None = None
    page_number: int | None = None
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    reward: float | None = None
    """Set on the done page."""
    reward_components: dict[str, Any] | None = None

    def available_actions(self) -> dict[str, Any]:
        """AgentBench's ``Available Actions`` object."""
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["clickables"] = list(self.clickables)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageView:
        return cls(**{**data, "clickables": tuple(data["clickables"])})


@dataclass(frozen=True)
class MoveResult:
    """The page after a move; ``refused`` says why a move was not made (the page is unchanged)."""

    view: PageView
    refused: str | None = None


class ShopSession(ABC):
    """One shopper's browser on the shop, for one episode."""

    @property
    @abstractmethod
    def view(self) -> PageView:
        """The page shown now."""

    @abstractmethod
    def search(self, keywords: str) -> MoveResult:
        """Type ``keywords`` in the search box and search (only where there is a search box)."""

    @abstractmethod
    def click(self, value: str) -> MoveResult:
        """Click the button, link or option whose text is ``value`` (case-insensitive)."""

    @abstractmethod
    def close(self) -> None:
        """Forget the session. Idempotent."""


class ShopBackend(ABC):
    """One shop for one env process, reused across episodes."""

    kind: ClassVar[str]
    """``embedded`` or ``server``."""

    @abstractmethod
    def open_session(self, goal: GoalSpec) -> ShopSession:
        """Start a shopper on the search page for ``goal``."""

    @abstractmethod
    def product_count(self) -> int:
        """How many products the shop sells."""

    @abstractmethod
    def close(self) -> None:
        """Release the shop (a server, connections). Idempotent."""


def goal_to_dict(goal: GoalSpec) -> dict[str, Any]:
    data = asdict(goal)
    data["attributes"] = list(goal.attributes)
    data["options"] = list(goal.options)
    return data


def goal_from_dict(data: dict[str, Any]) -> GoalSpec:
    return GoalSpec(**{**data, "attributes": tuple(data["attributes"]), "options": tuple(data["options"])})
