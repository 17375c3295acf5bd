"""The WebShop domain's metrics: WebShop's reward and its parts, read from the score components.

The headline is AgentBench's WebShop number, the mean reward (a score in [0, 1]); the
success rate (reward 1) is the catalog's ``success_rate``, shown beside it. The parts of
the reward (product type, attributes, options, price) are averaged over the episodes that
bought something, so an agent's weak spot shows: a low option share means it does not
choose options, a low type share that it buys the wrong kind of product.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agentunit_gym.core.domain import DomainMetric, Headline, ReportSection
from agentunit_gym.core.trace import EpisodeTrace

DOMAIN_NAME = "webshop"


def _components(t: EpisodeTrace) -> Mapping[str, Any] | None:
    if t.domain != DOMAIN_NAME or t.score is None:
        return None
    return t.score.components


def _bought(t: EpisodeTrace) -> Mapping[str, Any] | None:
    parts = _components(t)
    return parts if parts is not None and parts.get("purchased") else None


def _part(name: str) -> Any:
    def extract(t: EpisodeTrace) -> float | None:
        parts = _bought(t)
        value = parts.get(name) if parts is not None else None
        return None if value is None else float(value)

    return extract


def _purchased(t: EpisodeTrace) -> bool | None:
    parts = _components(t)
    return None if parts is None else bool(parts.get("purchased"))


METRICS: tuple[DomainMetric, ...] = (
    DomainMetric("webshop_purchase_rate", "Share of WebShop episodes that ended with a purchase (Buy Now).",
                 "rate", _purchased),
    DomainMetric("webshop_type_score", "Mean product-type factor r_type of the purchases (1, 0.5, 0.1 or 0).",
                 "mean", _part("r_type"), unit="score"),
    DomainMetric("webshop_attribute_share", "Mean share of the goal's attributes the purchased product has.",
                 "mean", _part("r_att"), unit="share"),
    DomainMetric("webshop_option_share", "Mean share of the goal's options chosen right (goals with options).",
                 "mean", _part("r_option"), unit="share"),
    DomainMetric("webshop_price_ok", "Share of purchases within the goal's price limit.",
                 "mean", _part("r_price"), unit="share"),
)


def mean_reward(rewards: Iterable[float]) -> float | None:
    """AgentBench's WebShop score: the mean reward; None for no episode."""
    values = [float(r) for r in rewards]
    return sum(values) / len(values) if values else None


HEADLINE = Headline(
    "webshop_reward",
    "AgentBench's WebShop score: the mean reward over the WebShop episodes (0 for those that bought nothing).",
    stratum=lambda t: "all" if _components(t) is not None else None,
    combine=lambda means: means.get("all"),
    value=lambda t: float(t.score.reward) if t.score is not None else 0.0,
    unit="score",
)

REPORT_SECTIONS: tuple[ReportSection, ...] = (
    ReportSection("WebShop: reward and its parts",
                  ("webshop_reward", "success_rate", *(m.name for m in METRICS)),
                  "Success is a reward of 1; the parts are averaged over the episodes that bought something."),
)
