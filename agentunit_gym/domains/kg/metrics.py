"""The KG domain's headline: AgentBench's main KG metric, the mean answer F1 over every item.

AgentBench averages F1 over all items, an item that never committed counting 0; the F1 is
read from the score's ``f1`` component the env writes.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentunit_gym.core.domain import DomainMetric, Headline, ReportSection
from agentunit_gym.core.trace import EpisodeTrace

DOMAIN_NAME = "kg"


def _stratum(t: EpisodeTrace) -> str | None:
    return "all" if t.domain == DOMAIN_NAME else None


def episode_f1(t: EpisodeTrace) -> float:
    """An episode's answer F1 (0 without a score or an ``f1`` component)."""
    if t.score is None:
        return 0.0
    value = t.score.components.get("f1")
    return float(value) if isinstance(value, (int, float)) else 0.0


def _mean(strata: Mapping[str, float]) -> float | None:
    return strata.get("all")


def _committed_not_executable(t: EpisodeTrace) -> bool | None:
    if t.domain != DOMAIN_NAME or t.score is None or "program" not in t.score.components:
        return None
    return not bool(t.score.components.get("executability"))


HEADLINE = Headline("kg_headline", "AgentBench's KG main metric: mean answer F1 over every item (0 when not answered).",
                    stratum=_stratum, combine=_mean, value=episode_f1, unit="score")

METRICS = (
    DomainMetric("kg_empty_answer_rate",
                 "Share of committed KG answers whose variable holds nothing (not executable).",
                 "rate", _committed_not_executable, higher_is_better=False),
)

REPORT_SECTIONS = (
    ReportSection("KG: AgentBench answer metrics", ("kg_headline", "f1", "exact_match", "executability",
                                                    "kg_empty_answer_rate"),
                  "F1 and exact match between answer sets; executability: the committed variable ran and "
                  "returned something."),
)
