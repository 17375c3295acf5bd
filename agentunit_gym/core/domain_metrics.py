"""What the evaluator computes and shows for a domain: its own metrics, its headline, its report blocks.

Parts of a domain's description (:class:`~agentunit_gym.core.domain.Domain`'s ``metrics``,
``headline`` and ``report_sections``), kept apart from the env and task facts there: they are
read from episode traces by the evaluator's summary and report only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentunit_gym.core.trace import EpisodeTrace

__all__ = ["DomainMetric", "Headline", "ReportSection"]


@dataclass(frozen=True)
class DomainMetric:
    """A metric only this domain has, added to the evaluator's catalog.

    Computed from episode traces only; episodes of other domains return None from
    :attr:`extract` and are not counted.
    """

    name: str
    """Metric name in summary.json and the report (prefix it with the domain name)."""
    description: str
    """One sentence for docs/metrics.md and the report."""
    kind: Literal["rate", "mean"]
    """``rate``: extract gives a yes/no per episode (Wilson interval); ``mean``: a number
    per episode (bootstrap interval)."""
    extract: Callable[[EpisodeTrace], bool | float | None]
    """The episode's value, None when the episode does not qualify."""
    unit: str = "share"
    """How to print the value: ``share`` (a percentage), ``score``, ``steps``, ``s`` ..."""
    higher_is_better: bool | None = True
    """Direction, for the report's colouring; None when neither is better."""


@dataclass(frozen=True)
class Headline:
    """The domain's headline number, as its benchmark reports it.

    A stratified mean: each episode falls into one stratum (:attr:`stratum`, read from the
    score's components, never from labels), the per-stratum means of :attr:`value` are
    taken, and :attr:`combine` turns them into the headline. The evaluator's interval
    resamples within each stratum. AgentBench's DB headline: strata are the SQL families,
    value is success, combine is the mean of SELECT, INSERT and UPDATE.
    """

    name: str
    """Metric name, e.g. ``"db_headline"``."""
    description: str
    """One sentence for docs and the report."""
    stratum: Callable[[EpisodeTrace], str | None]
    """The stratum of an episode of this domain, None when it does not count."""
    combine: Callable[[Mapping[str, float]], float | None]
    """The headline from the per-stratum means; None when it is undefined for those strata."""
    value: Callable[[EpisodeTrace], float] = field(default=lambda t: float(t.score.success) if t.score else 0.0)
    """An episode's value inside its stratum (default: success as 0/1)."""
    unit: str = "share"
    """How to print the value."""

    def strata(self, traces: Sequence[EpisodeTrace]) -> dict[str, list[float]]:
        """The values of ``traces`` per stratum (episodes without one are left out)."""
        out: dict[str, list[float]] = {}
        for t in traces:
            key = self.stratum(t)
            if key is not None:
                out.setdefault(key, []).append(self.value(t))
        return out

    def compute(self, traces: Sequence[EpisodeTrace]) -> float | None:
        """The headline of ``traces`` (no interval), None when no episode counts."""
        groups = self.strata(traces)
        if not groups:
            return None
        return self.combine({k: sum(v) / len(v) for k, v in groups.items()})


@dataclass(frozen=True)
class ReportSection:
    """A block of the HTML report and the terminal summary for this domain."""

    title: str
    """Heading, e.g. ``"DB: AgentBench families"``."""
    metrics: tuple[str, ...]
    """Metric names shown in the block (the domain's metrics, its headline, catalog metrics)."""
    description: str = ""
    """A sentence under the heading."""
