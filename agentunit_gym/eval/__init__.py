"""The evaluator, by stage: agents, plan, record, run, judge, report.

Each stage is a sub-package that imports only the stages before it in that list:

- ``agents/``: what the engine drives (the agent protocol, the built-in agents, the model client);
- ``plan/``: what a run is (``EvalConfig``, env ids and backends, the work items and their seeds);
- ``record/``: what it leaves on disk (the run folder, ``episodes.jsonl``, traces, the export);
- ``run/``: the episode engine (slots, env copies, the schedule, deadlines, the Ray cluster);
- ``judge/``: judged criteria over recorded episodes;
- ``report/``: what the records mean (metrics, statistics, summary, comparison, the HTML report).

The pipelines sit on top: :func:`agentunit_gym.eval.evaluate.evaluate` (what ``agentunit-gym
eval`` calls: plan, run, record, report), :mod:`agentunit_gym.eval.judging` (``agentunit-gym
judge``) and :mod:`agentunit_gym.eval.taskcheck` (``tasks check``). docs/eval.md lists where each
module of the old flat layout went. See docs/eval.md, docs/metrics.md and docs/agents.md.
"""

from agentunit_gym.eval.agents.builtin import Agent, OracleAgent, RandomAgent, resolve_agent
from agentunit_gym.eval.report.metrics import Episode, compute_metrics, finish_distribution
from agentunit_gym.eval.run.runner import EvalConfig, run_episodes

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
