"""The DB domain: AgentBench's SQL task on a MySQL-compatible server or embedded SQLite.

Exports :data:`DOMAIN`, registered under the entry-point group ``agentunit_gym.domains``.
"""

from agentunit_gym.domains.db.domain import DOMAIN

__all__ = ["DOMAIN"]
