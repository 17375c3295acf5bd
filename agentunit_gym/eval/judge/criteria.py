"""Criteria the judge scores episodes on (AgentEval's critic output): models, files, defaults.

A criterion has a name, a description and its accepted values, ordered from worst to best;
an episode's score on it is the chosen value's position scaled to [0, 1]
(``index / (len(values) - 1)``), so every criterion becomes a 0-1 metric.

Criteria files (``--criteria FILE``, and each domain's bundled ``criteria.yaml``) are YAML::

    criteria:                       # every category of the domain
      - name: answer_form
        description: Is the final answer exactly the value asked for?
        accepted_values: [wrong or missing, imprecise, as asked]
    categories:                     # optional: a category's own list replaces the above
      count: [...]

A ``--criteria`` file for several domains nests that under the domain's name
(``os: {criteria: [...]}``); a file with a top-level ``criteria`` applies to every domain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentunit_gym.core import registry
from agentunit_gym.errors import ConfigError

ANY_CATEGORY = "*"


class Criterion(BaseModel):
    """One criterion with its accepted values (worst first)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_ -]+$")
    """A short identifier (letters, digits, ``_``, ``-``, spaces)."""
    description: str = Field(min_length=1)
    """What the quantifier looks for."""
    accepted_values: tuple[str, ...] = Field(min_length=2, max_length=10)
    """The values the quantifier may give, from worst to best."""

    @field_validator("accepted_values")
    @classmethod
    def _distinct(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        if len({v.strip().lower() for v in values}) != len(values):
            raise ValueError("accepted values must be distinct")
        return values

    def score(self, value: str) -> float | None:
        """The 0-1 score of ``value`` (matched case-insensitively); None when it is not accepted."""
        wanted = value.strip().lower()
        for index, accepted in enumerate(self.accepted_values):
            if accepted.strip().lower() == wanted:
                return index / (len(self.accepted_values) - 1)
        return None


class Dropped(BaseModel):
    """A criterion the verifier set aside, and why."""

    model_config = ConfigDict(frozen=True)

    criterion: Criterion
    reason: str
    stability: float | None = None
    separation: float | None = None


class CriteriaSet(BaseModel):
    """The criteria of one (domain, category), after verification."""

    model_config = ConfigDict(frozen=True)

    domain: str
    category: str
    source: Literal["critic", "file", "bundled"]
    criteria: tuple[Criterion, ...] = ()
    """The criteria kept (the ones episodes are scored on)."""
    dropped: tuple[Dropped, ...] = ()
    verification: dict[str, Any] = Field(default_factory=dict)
    """Per criterion: ``stability`` (share of repeats agreeing with the most common value),
    ``separation`` (mean score of the successful example minus the failed one) and a ``note``."""
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.domain}/{self.category}"


def _parse_list(raw: Any, where: str) -> tuple[Criterion, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of criteria (name, description, accepted_values).")
    out = []
    for index, item in enumerate(raw):
        values = item.get("accepted_values") if isinstance(item, dict) else None
        if isinstance(values, list) and any(isinstance(v, bool) for v in values):
            raise ConfigError(f"{where}, criterion {index + 1}: accepted_values: YAML read an unquoted yes/no/on/off "
                              "as true/false; quote the values (\"no\", \"yes\").")
        try:
            out.append(Criterion.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "criterion"
            raise ConfigError(f"{where}, criterion {index + 1}: {field}: {first['msg']}.") from exc
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: criterion names repeat ({', '.join(sorted(names))}).")
    return tuple(out)


def _parse_domain_block(raw: Any, where: str) -> dict[str, tuple[Criterion, ...]]:
    if not isinstance(raw, dict) or ("criteria" not in raw and "categories" not in raw):
        raise ConfigError(f"{where}: expected a mapping with 'criteria' (and optionally 'categories').")
    out: dict[str, tuple[Criterion, ...]] = {}
    if "criteria" in raw:
        out[ANY_CATEGORY] = _parse_list(raw["criteria"], f"{where}: criteria")
    categories = raw.get("categories") or {}
    if not isinstance(categories, dict):
        raise ConfigError(f"{where}: 'categories' must map a category to its list of criteria.")
    for category, items in categories.items():
        out[str(category)] = _parse_list(items, f"{where}: category {category}")
    return out


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"criteria file {path}: cannot read it ({exc}).") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"criteria file {path}: not valid YAML ({exc}).") from exc


def load_criteria_file(path: Path) -> dict[str, dict[str, tuple[Criterion, ...]]]:
    """Read a ``--criteria`` file: domain -> category (``*`` for all) -> criteria.

    A top-level ``criteria``/``categories`` mapping applies to every domain (key ``*``).

    Raises:
        ConfigError: the file is missing, not YAML, or a criterion is malformed (naming which).
    """
    raw = _read_yaml(path)
    if isinstance(raw, dict) and ("criteria" in raw or "categories" in raw):
        return {ANY_CATEGORY: _parse_domain_block(raw, str(path))}
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"criteria file {path}: expected 'criteria: [...]' or one such block per domain name.")
    return {str(domain): _parse_domain_block(block, f"{path}: {domain}") for domain, block in raw.items()}


def bundled_criteria(domain: str) -> dict[str, tuple[Criterion, ...]]:
    """The domain's reviewed defaults (its description's ``criteria`` file); empty when it has none."""
    if domain not in registry.domain_names():
        return {}
    path = registry.get_domain(domain).criteria
    if path is None:
        return {}
    return _parse_domain_block(_read_yaml(Path(path)), str(path))


def pick(table: dict[str, dict[str, tuple[Criterion, ...]]], domain: str, category: str) -> tuple[Criterion, ...]:
    """The criteria of (domain, category) in a table: the category's own list, else the domain's,
    else the table's catch-all; empty when none applies."""
    for block in (table.get(domain), table.get(ANY_CATEGORY)):
        if block:
            found = block.get(category) or block.get(ANY_CATEGORY)
            if found:
                return found
    return ()


__all__ = ["ANY_CATEGORY", "CriteriaSet", "Criterion", "Dropped", "bundled_criteria", "load_criteria_file", "pick"]
