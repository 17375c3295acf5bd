"""The WebShop domain: WebShop's search-and-click shop over a generated 100k-product catalog.

Exports :data:`DOMAIN`, registered under the entry-point group ``agentunit_gym.domains``.
"""

from agentunit_gym.domains.webshop.domain import DOMAIN

__all__ = ["DOMAIN"]
