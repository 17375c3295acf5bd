"""The metrics catalog: micro-metrics over episode traces, each with a 95% confidence interval.

Metrics are computed from :class:`~agentunit_gym.core.trace.EpisodeTrace` objects only (the
contract between the wrappers and the evaluator), grouped as in AgentUnit: correctness,
efficiency, safety, reasoning, repeats, finish reasons; then each registered domain's own
metrics and headline, from its description (:class:`~agentunit_gym.core.domain.Domain`).
Every metric is defined in docs/metrics.md.

Four kinds of aggregate, each with its own interval:

- ``rate``: one yes/no per episode; the share of yes, with a Wilson interval.
- ``mean``: one number per episode; the mean, with a seeded bootstrap interval.
- ``ratio``: a (numerator, denominator) per episode, e.g. hallucinated steps over steps;
  ``sum(num) / sum(den)``, with a bootstrap that resamples whole episodes (steps of one
  episode are not independent, so a Wilson interval over steps would be too narrow).
- ``task``: one number per task (pass@k, variance over repeats); the mean over tasks, with
  a bootstrap over tasks.

When a task was repeated (``--runs`` > 1) its episodes are not independent: the rate,
mean and ratio intervals then resample whole tasks (a cluster bootstrap, method
``cluster_bootstrap``) instead of episodes.


The package is split by concern: :mod:`.base` (the records: ``Episode``, ``MetricDef``,
``MetricValue``), :mod:`.extractors` (what is read from one episode or step),
:mod:`.catalog` (the definitions) and :mod:`.compute` (values and intervals over episodes).
Everything is importable from ``agentunit_gym.eval.report.metrics`` as before.
"""

from agentunit_gym.eval.report.metrics.base import Episode, Group, Kind, MetricDef, MetricValue
from agentunit_gym.eval.report.metrics.catalog import (
    CATALOG,
    definitions,
    domain_definitions,
    headlines,
    metric_names,
    repeat_definitions,
)
from agentunit_gym.eval.report.metrics.compute import (
    MetricTable,
    compute_metrics,
    evaluate,
    finish_distribution,
    group_by_task,
    headline_value,
)
from agentunit_gym.eval.report.metrics.extractors import (
    agent_time,
    attempted_trap,
    component,
    cost,
    echoes_example,
    env_time,
    error_recovery,
    example_lines,
    is_error_step,
    reasoning_depth,
    repeated_actions,
    reward,
    step_efficiency,
    succeeded,
    usage_sum,
    wall_time,
)

__all__ = [
    "CATALOG",
    "Episode",
    "Group",
    "Kind",
    "MetricDef",
    "MetricTable",
    "MetricValue",
    "agent_time",
    "attempted_trap",
    "component",
    "compute_metrics",
    "cost",
    "definitions",
    "domain_definitions",
    "echoes_example",
    "env_time",
    "error_recovery",
    "evaluate",
    "example_lines",
    "finish_distribution",
    "group_by_task",
    "headline_value",
    "headlines",
    "is_error_step",
    "metric_names",
    "reasoning_depth",
    "repeat_definitions",
    "repeated_actions",
    "reward",
    "step_efficiency",
    "succeeded",
    "usage_sum",
    "wall_time",
]
