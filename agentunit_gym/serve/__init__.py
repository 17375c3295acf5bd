"""Envs behind a server: the OpenEnv-compatible env server and the ``AgentUnit/Remote-v0`` client env.

Modules: ``server`` (``agentunit-gym serve``: OpenEnv's app, our session pool, limits and
security), ``session`` (one session as an OpenEnv ``Environment``), ``pool`` (the warm pool
of env copies), ``remote`` (the client env), ``jsonsafe`` (``info`` as JSON). Nothing is
imported here: the server needs the ``serve`` extra (``pip install "agentunit-gym[serve]"``).
"""
