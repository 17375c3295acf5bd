"""The judge's settings and files: :class:`JudgeConfig`, the ``judge/judged.jsonl`` line
(:class:`JudgedEpisode`), what a ``judge_run`` did (:class:`JudgeOutcome`), and the readers of
``judge/``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentunit_gym.core.trace import Usage
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.agents.model_client import OpenAIConfig

JUDGE_VERSION = 1

EXIT_NOTHING_JUDGED = 4
"""The exit code of ``agentunit-gym judge`` (and ``eval --judge``) when no episode of the run
could be judged: every judge answer was garbage, a refusal or an endpoint failure, or the run
has no episode to judge."""


def parse_judge_spec(spec: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                     **options: Any) -> OpenAIConfig:
    """``openai:<model>`` (the only kind today) as the judge's model config.

    Raises:
        ConfigError: another spec.
    """
    if not spec.startswith("openai:") or not spec.split(":", 1)[1]:
        raise ConfigError(f"--judge {spec!r}: write openai:<model>, e.g. openai:gpt-4o-mini "
                          "(with --base-url for a local OpenAI-compatible server).")
    settings: dict[str, Any] = {"model": spec.split(":", 1)[1], "api_key_env": api_key_env,
                                "max_tokens": 1024, **options}
    if base_url:
        settings["base_url"] = base_url
    return OpenAIConfig(**settings)


@dataclass(frozen=True)
class JudgeConfig:
    """How to judge a run.

    Attributes:
        model: the judge's endpoint and model (critic, quantifier and verifier alike).
        criteria: ``critic`` (proposed from the run's episodes; the bundled defaults when the
            critic fails), ``bundled`` (each domain's reviewed defaults), or a criteria file.
        repeats: how many times the verifier quantifies each example episode.
        min_stability: a criterion whose most common value, per example episode, covers less
            than this share of the repeats is dropped as unstable.
        min_separation: a criterion whose mean score on the successful example is not above
            the failed example's by more than this is dropped as not separating.
        concurrency: judge calls in flight at once.
    """

    model: OpenAIConfig
    criteria: Literal["critic", "bundled"] | Path = "critic"
    repeats: int = 3
    min_stability: float = 0.8
    min_separation: float = 0.0
    concurrency: int = 4

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.concurrency < 1:
            raise ConfigError("judge repeats and concurrency must be at least 1.")
        if not 0.0 <= self.min_stability <= 1.0:
            raise ConfigError(f"min_stability must be in [0, 1], got {self.min_stability}.")

    @property
    def label(self) -> str:
        return f"openai:{self.model.model}"


class JudgedEpisode(BaseModel):
    """One line of ``judge/judged.jsonl``."""

    model_config = ConfigDict(frozen=True)

    key: str
    episode_id: str
    domain: str
    category: str
    status: Literal["judged", "unjudged"]
    judge: str
    criteria_set: str
    success: bool
    """The env's own check (``score.success``), kept for the agreement figure."""
    goal_fidelity: float | None = None
    achieved: bool | None = None
    values: dict[str, str] = Field(default_factory=dict)
    scores: dict[str, float] = Field(default_factory=dict)
    reason: str = ""
    error: str = ""
    error_kind: str = ""
    """For ``unjudged``: ``garbage``, ``refused``, ``timeout``, ``api_error`` or ``context_limit``."""
    usage: Usage = Field(default_factory=Usage)
    judged_at: float = 0.0


def judge_dir(run_dir: Path) -> Path:
    return run_dir / "judge"


def read_judged(run_dir: Path) -> dict[str, JudgedEpisode]:
    """The run's judged lines, the last one per episode key (a torn last line is skipped)."""
    path = judge_dir(run_dir) / "judged.jsonl"
    if not path.exists():
        return {}
    out: dict[str, JudgedEpisode] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            item = JudgedEpisode.model_validate_json(line)
        except ValueError:
            continue
        out[item.key] = item
    return out


def read_criteria(run_dir: Path) -> dict[str, Any] | None:
    path = judge_dir(run_dir) / "criteria.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


@dataclass
class JudgeOutcome:
    """What a ``judge_run`` did."""

    judged: int = 0
    unjudged: int = 0
    skipped: int = 0
    """Episodes judged by an earlier call, not judged again."""
    new_sets: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    reply_format: str = "unknown"
    """How the judge's answers were asked for: ``json_schema`` or ``plain`` (:attr:`Judge.reply_format`)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens and cost of every judge call of this ``judge_run`` (critic, verifier, quantifier; garbage included)."""

    @property
    def nothing_judged(self) -> bool:
        """No episode of the run is judged, by this call or an earlier one (the CLI exits
        with :data:`EXIT_NOTHING_JUDGED`)."""
        return self.judged == 0 and self.skipped == 0


ProgressFn = Callable[[JudgedEpisode, int, int], None]



__all__ = ["EXIT_NOTHING_JUDGED", "JUDGE_VERSION", "JudgeConfig", "JudgeOutcome", "JudgedEpisode", "ProgressFn",
           "judge_dir", "parse_judge_spec", "read_criteria", "read_judged"]
