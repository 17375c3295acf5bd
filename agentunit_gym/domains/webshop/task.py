"""The WebShop task spec: a shopping goal (WebShop's goal dict) and its reference purchase.

A goal names a target product (``asin``, its title ``name``, ``query`` and breadcrumb
``product_category``), the attributes and options the shopper wants and a price limit,
and the instruction that says so in words. The reward compares what is bought with these
fields (see ``backends/shop/reward.py``); any product that satisfies them earns 1, not
only the target.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from agentunit_gym.backends.shop.reward import GoalSpec
from agentunit_gym.tasks.spec import TaskSpec


class WebShopTask(TaskSpec):
    """A WebShop goal."""

    asin: str = Field(min_length=1)
    """The target product's ASIN in the env's catalog."""
    name: str = Field(min_length=1)
    """The target product's title (WebShop's goal ``name``; the product-type reward compares titles)."""
    query: str
    """The query the target was listed under (WebShop's ``query``)."""
    product_category: str
    """The target's breadcrumb, parts joined by `` › ``."""
    attributes: tuple[str, ...] = Field(min_length=1)
    """Goal attributes (lowercase phrases)."""
    goal_options: dict[str, str] = Field(default_factory=dict)
    """Goal options, group -> value."""
    price_upper: float = Field(gt=0)
    """The price limit in dollars."""
    catalog: str = "generated:0:100000"
    """The catalog the goal was written for: ``generated:<seed>:<size>`` or ``webshop-files``."""

    @model_validator(mode="after")
    def _commits_last(self) -> WebShopTask:
        steps = self.reference_solution
        if steps and not (steps[-1].tool == "click" and str(steps[-1].arguments).lower() == "buy now"):
            raise ValueError("the reference solution must end with click 'Buy Now'")
        return self

    def goal(self) -> GoalSpec:
        """The goal as the shop's reward reads it."""
        return GoalSpec(
            asin=self.asin,
            name=self.name,
            query=self.query,
            product_category=self.product_category,
            attributes=self.attributes,
            options=tuple(self.goal_options.values()),
            price_upper=self.price_upper,
            instruction=self.instruction,
        )
