"""Run: the episodes of a plan, each stepping as soon as its own agent replies.

- :mod:`~agentunit_gym.eval.run.runner`: :func:`run_episodes`, the stage's entry point (probe
  each env id, plan, run, write each record as it finishes; resume).
- :mod:`~agentunit_gym.eval.run.engine`: the one asynchronous episode engine.
- :mod:`~agentunit_gym.eval.run.slots`: an episode in flight and how it becomes a record.
- :mod:`~agentunit_gym.eval.run.copies`: the env copies the engine drives and where they live (``--vector``).
- :mod:`~agentunit_gym.eval.run.schedule`: the ``ScheduleEpisodes`` wrapper through which the
  engine assigns tasks and ends episodes from outside.
- :mod:`~agentunit_gym.eval.run.deadlines`: every deadline of the engine and the cluster.
- :mod:`~agentunit_gym.eval.run.cluster`, ``cluster_connect``, ``cluster_node``: the same
  engine on the nodes of a Ray cluster (``--ray``).

Imports only the record, plan and agents stages below it.
"""
