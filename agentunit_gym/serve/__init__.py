"""Envs behind a server, for agents and rollout workers elsewhere.

Modules: ``server`` (``agentunit-gym serve``: OpenEnv's app, our session pool, limits and
security), ``session`` (one session as an OpenEnv ``Environment``), ``pool`` (the warm pool
of env copies), ``remote`` (the ``AgentUnit/Remote-v0`` client env), ``jsonsafe`` (``info``
as JSON); ``mcp_server`` (``agentunit-gym mcp``) over the episode pool ``served_episodes``.
Nothing is imported here: the servers need the ``serve`` and ``mcp`` extras.
"""
