"""The DB domain's metrics: per-family accuracies and AgentBench's DB headline.

One definition of the headline, read from the scores the env writes: an episode's family is
``score.components["family"]`` (``SELECT`` for every SELECT-family category, else
``INSERT`` / ``UPDATE`` / ``DELETE``), never guessed from labels. The evaluator's
``db_headline`` metric and :func:`db_headline` here are the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agentunit_gym.core.domain import DomainMetric, Headline, ReportSection
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.domains.db.task import type_family
from agentunit_gym.errors import ConfigError

DOMAIN_NAME = "db"

FAMILIES: tuple[str, ...] = ("SELECT", "INSERT", "UPDATE", "DELETE")
"""AgentBench's DB families."""

HEADLINE_FAMILIES: tuple[str, ...] = ("SELECT", "INSERT", "UPDATE")
"""The families whose accuracies :func:`db_headline` averages (DELETE is reported, not averaged)."""


def episode_family(t: EpisodeTrace) -> str | None:
    """The family of a DB episode, from its score's ``family`` component; None for other domains
    and for episodes without a score (an infrastructure error)."""
    if t.domain != DOMAIN_NAME or t.score is None:
        return None
    family = t.score.components.get("family")
    return str(family) if family else None


def accuracy_by_family(components: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per-family accuracy from episode scores.

    Args:
        components: each episode's ``score["components"]`` (``family``, else ``type``, and
            ``success``; an episode that never committed counts with ``success`` False).

    Returns:
        The share of successes per family present in the input.

    Raises:
        ConfigError: a component mapping with neither ``family`` nor ``type``.
    """
    totals: dict[str, list[int]] = {}
    for comp in components:
        family = comp.get("family") or (type_family(str(comp["type"])) if comp.get("type") else None)
        if not family:
            raise ConfigError(f"a DB score without a 'family' or 'type' component: {dict(comp)!r}.")
        bucket = totals.setdefault(str(family), [0, 0])
        bucket[0] += int(bool(comp.get("success")))
        bucket[1] += 1
    return {family: ok / n for family, (ok, n) in totals.items()}


def db_headline(accuracy: Mapping[str, float], *, require_all: bool = False) -> float | None:
    """AgentBench's DB headline: the mean of the SELECT, INSERT and UPDATE accuracies.

    Args:
        accuracy: accuracy per family, e.g. from :func:`accuracy_by_family`.
        require_all: raise when one of the three families is missing (AgentBench's number
            is only comparable with all three); by default the mean is over those present,
            which is what a run's summary reports beside the per-family accuracies.

    Returns:
        The mean of the headline families present; None when none is.

    Raises:
        ConfigError: ``require_all`` and a headline family is missing.
    """
    missing = [f for f in HEADLINE_FAMILIES if f not in accuracy]
    if require_all and missing:
        raise ConfigError(
            f"the DB headline needs SELECT, INSERT and UPDATE accuracies; missing {missing}. "
            "Run tasks of every one of these types, or report per-family accuracy."
        )
    present = [float(accuracy[f]) for f in HEADLINE_FAMILIES if f in accuracy]
    return sum(present) / len(present) if present else None


def _family_rate(family: str) -> DomainMetric:
    def extract(t: EpisodeTrace) -> bool | None:
        if episode_family(t) != family:
            return None
        return bool(t.score is not None and t.score.success)

    return DomainMetric(f"db_{family.lower()}_accuracy", f"Success rate of DB episodes of the {family} family.",
                        "rate", extract)


METRICS: tuple[DomainMetric, ...] = tuple(_family_rate(f) for f in HEADLINE_FAMILIES)
"""Per-family success rates (the pieces of the headline)."""

HEADLINE = Headline(
    "db_headline",
    "AgentBench's DB score: the mean of the SELECT, INSERT and UPDATE accuracies (families present), "
    "each family weighted equally whatever its episode count.",
    stratum=lambda t: family if (family := episode_family(t)) in HEADLINE_FAMILIES else None,
    combine=db_headline,
)

REPORT_SECTIONS: tuple[ReportSection, ...] = (
    ReportSection("DB: AgentBench families", ("db_headline", *(m.name for m in METRICS)),
                  "The headline averages the family accuracies, not the episodes."),
)
