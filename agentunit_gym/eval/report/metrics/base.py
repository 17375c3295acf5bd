"""The records the metrics catalog is made of: an episode as the metrics see it, a metric's
definition and its value over a set of episodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.eval.report.stats import Interval

Kind = Literal["rate", "mean", "ratio", "task"]
Group = Literal["correctness", "efficiency", "safety", "reasoning", "repeats", "finish", "domain"]


@dataclass(frozen=True)
class Episode:
    """One finished episode as the metrics see it.

    Attributes:
        trace: the episode trace.
        run: the repeat index (0-based) of this task.
        agent: the agent's label.
    """

    trace: EpisodeTrace
    run: int = 0
    agent: str = "agent"

    @property
    def task_key(self) -> tuple[str, str]:
        """(env, task id): repeats of one task share it."""
        return (self.trace.env_id or self.trace.domain, self.trace.task_id)


@dataclass(frozen=True)
class MetricValue:
    """A metric's value over a set of episodes.

    Attributes:
        name: the catalog name.
        group: the AgentUnit group.
        value: the point estimate; None when no episode qualifies (e.g. no DB episode).
        ci: the 95% interval, None when ``value`` is None or the metric has no interval.
        n: how many units (episodes, tasks, ...) went into it.
        unit: what the value counts (``share``, ``steps``, ``s``, ``tokens``, ``USD`` ...).
    """

    name: str
    group: str
    value: float | None
    ci: Interval | None
    n: int
    unit: str
    higher_is_better: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "value": self.value,
            "ci_low": self.ci.low if self.ci else None,
            "ci_high": self.ci.high if self.ci else None,
            "ci_method": self.ci.method if self.ci else None,
            "n": self.n,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
        }


@dataclass(frozen=True)
class MetricDef:
    """One entry of the catalog.

    ``extract`` maps an episode to its contribution: a bool (rate), a float (mean), a
    ``(num, den)`` pair (ratio), or None when the episode does not count for this metric.
    Task-level metrics set ``per_task`` instead.
    """

    name: str
    group: Group
    kind: Kind
    description: str
    unit: str = "share"
    higher_is_better: bool | None = True
    extract: Callable[[Episode], Any] | None = None
    per_task: Callable[[list[Episode]], float | None] | None = None
    scale: Literal["mean", "sum"] = "mean"
    """For ``mean`` metrics: report the mean (default) or the total over episodes."""
