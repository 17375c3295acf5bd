"""The evaluator: agents, the episode engine, the metrics catalog, summaries and reports.

Entry points: :func:`agentunit_gym.eval.evaluate.evaluate` (what ``agentunit-gym eval``
calls), :func:`agentunit_gym.eval.metrics.compute_metrics` (metrics over traces), and
:func:`agentunit_gym.eval.compare.compare_runs`. See docs/eval.md, docs/metrics.md and
docs/agents.md.
"""

from agentunit_gym.eval.agents import Agent, OracleAgent, RandomAgent, resolve_agent
from agentunit_gym.eval.metrics import Episode, compute_metrics, finish_distribution
from agentunit_gym.eval.runner import EvalConfig, run_episodes

__all__ = [
    "Agent",
    "Episode",
    "EvalConfig",
    "OracleAgent",
    "RandomAgent",
    "compute_metrics",
    "finish_distribution",
    "resolve_agent",
    "run_episodes",
]
