"""Every deadline of the episode engine, in one place: how long an env call, an agent's
reply, a node of a Ray cluster and the closing of env copies may take before the run
gives up on them.

The episode limit itself is the run's (:attr:`~agentunit_gym.eval.plan.config.EvalConfig.episode_timeout_s`);
these are the allowances on top of it, and the cluster's own waits.
"""

from __future__ import annotations

STEP_GRACE_S = 60.0
"""How long past the episode limit an env reset or step may take before the run gives up on the backend
(:class:`~agentunit_gym.errors.BackendTimeoutError`)."""

AGENT_GRACE_S = 1.0
"""How long past the episode's deadline an agent's reply is waited for before the episode ends as TLE."""

CLOSE_TIMEOUT_S = 60.0
"""How long closing the env copies (and a Ray cluster's actors) may take at the end of a run."""

PROBE_TIMEOUT_S = 5.0
"""How long a TCP connect to a Ray ``HOST:PORT`` may take before the cluster counts as unreachable."""

ACTOR_START_TIMEOUT_S = 120.0
"""How long the Ray actors may take to start (a worker process per node) before a node is left out."""

ENV_SETUP_S = 300.0
"""Allowance for making an env on a Ray node (a container, a database server), on top of the episodes' own limits."""

POLL_S = 0.5
"""How often the Ray driver looks at its deadlines while waiting for results."""


def episode_call_timeout(episode_timeout_s: float) -> float:
    """The deadline of one env call (reset or step) in an episode limited to ``episode_timeout_s``."""
    return episode_timeout_s + STEP_GRACE_S


__all__ = ["ACTOR_START_TIMEOUT_S", "AGENT_GRACE_S", "CLOSE_TIMEOUT_S", "ENV_SETUP_S", "POLL_S", "PROBE_TIMEOUT_S",
           "STEP_GRACE_S", "episode_call_timeout"]
