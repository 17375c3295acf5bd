"""Plan, the first stage of a run: what it is and which episodes it holds.

- :mod:`~agentunit_gym.eval.plan.config`: :class:`EvalConfig` (``config.json``; a resume must match it).
- :mod:`~agentunit_gym.eval.plan.routing`: env ids, their domains and backends, ``--tasks`` paths,
  and the env factory (the standard stack, protocol included: ``make_eval_env``).
- :mod:`~agentunit_gym.eval.plan.env_options`: ``--env-option [ENV:]KEY=VALUE``.
- :mod:`~agentunit_gym.eval.plan.work`: the work items (tasks x repeats, each with its own seed)
  and the tasks left out.

Imports only :mod:`agentunit_gym.eval.agents` below it (and the layers under ``eval``).
"""

from agentunit_gym.eval.plan.work import (
    LeftOut,
    WorkItem,
    episode_seed,
    left_out,
    left_out_tasks,
    list_tasks,
    plan,
    selected_left_out,
    warn_left_out,
)

__all__ = ["LeftOut", "WorkItem", "episode_seed", "left_out", "left_out_tasks", "list_tasks", "plan",
           "selected_left_out", "warn_left_out"]
