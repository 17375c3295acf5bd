"""Judge a recorded run: criteria per (domain, category), verified, then every episode quantified.

Files, under ``RUN_DIR/judge/``:

- ``criteria.json``: the judge model, its endpoint, the prompts, the verifier's settings, and
  per (domain, category) the criteria kept, the ones dropped with the reason, and how stable
  and how separating each was.
- ``judged.jsonl``: one line per episode judged (or that the judge failed on: ``unjudged``,
  with the reason; such episodes are tried again on the next ``judge`` of the run, judged
  ones never are).

Example::

    config = JudgeConfig(OpenAIConfig(model="gpt-4o-mini"))
    outcome = asyncio.run(judge_run(Path("results/my-run"), config))
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentunit_gym.core import registry
from agentunit_gym.core.trace import EpisodeTrace, Usage
from agentunit_gym.errors import AgentContextLimitError, AgentUnitError, ConfigError
from agentunit_gym.eval.judge.criteria import (
    CriteriaSet,
    Criterion,
    Dropped,
    bundled_criteria,
    load_criteria_file,
    pick,
)
from agentunit_gym.eval.judge.prompts import (
    CRITIC_SYSTEM,
    QUANTIFIER_SYSTEM,
    JudgeAnswerError,
    Judgement,
    critic_messages,
    parse_criteria,
    parse_judgement,
    quantifier_messages,
)
from agentunit_gym.eval.model_client import ModelAPIError, ModelClient, OpenAIConfig
from agentunit_gym.eval.records import NOT_MEASURED, EpisodeRecord, RunPaths, iter_records

JUDGE_VERSION = 1


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


ProgressFn = Callable[[JudgedEpisode, int, int], None]


def _add(total: Usage, usage: Usage) -> Usage:
    def plus(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else a + b
    return Usage(tokens_in=plus(total.tokens_in, usage.tokens_in),  # type: ignore[arg-type]
                 tokens_out=plus(total.tokens_out, usage.tokens_out),  # type: ignore[arg-type]
                 cost=plus(total.cost, usage.cost), latency_s=plus(total.latency_s, usage.latency_s))


class Judge:
    """The critic, the quantifier and the verifier over one model client."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.client = ModelClient(config.model)
        self.usage = Usage()
        # Every judge call (critic, verifier, quantifier) takes a slot: at most ``concurrency`` in flight.
        self._slots = asyncio.Semaphore(config.concurrency)

    async def ask(self, messages: list[dict[str, Any]]) -> tuple[str, Usage]:
        """One judge call; the reply's text and the call's usage.

        Raises:
            JudgeAnswerError: the model refused (``kind="refused"``).
            ModelAPIError, AgentContextLimitError: the endpoint failed.
        """
        async with self._slots:
            completion = await self.client.complete(messages)
        self.usage = _add(self.usage, completion.usage)
        if completion.refusal or completion.finish_reason == "content_filter":
            raise JudgeAnswerError(f"the judge refused: {(completion.refusal or 'content filter')[:200]}", "refused")
        return completion.text, completion.usage

    async def quantify(self, trace: EpisodeTrace, criteria: tuple[Criterion, ...]) -> Judgement:
        """Score one episode (raises as :meth:`ask`, and :class:`JudgeAnswerError` on a malformed answer)."""
        text, usage = await self.ask(quantifier_messages(trace, criteria))
        try:
            return dataclasses.replace(parse_judgement(text, criteria), usage=usage)
        except JudgeAnswerError as exc:
            if _looks_like_refusal(text):
                raise JudgeAnswerError(f"the judge refused: {text[:200]!r}", "refused") from exc
            raise

    async def propose(self, domain: str, category: str, succeeded: EpisodeTrace | None,
                      failed: EpisodeTrace | None) -> tuple[Criterion, ...]:
        """The critic's criteria for one (domain, category)."""
        text = _domain_text(domain)
        reply, _ = await self.ask(critic_messages(text, category, succeeded, failed))
        return parse_criteria(reply)

    async def verify(self, domain: str, category: str, source: Literal["critic", "file", "bundled"],
                     criteria: tuple[Criterion, ...], succeeded: EpisodeTrace | None,
                     failed: EpisodeTrace | None, notes: Sequence[str] = ()) -> CriteriaSet:
        """Quantify the example episodes ``repeats`` times each; drop unstable criteria and
        criteria on which the successful example does not score above the failed one."""
        notes = list(notes)
        examples = [(label, t) for label, t in (("successful", succeeded), ("failed", failed)) if t is not None]
        runs: dict[str, list[Judgement]] = {}
        errors: list[str] = []
        for label, trace in examples:
            results = await asyncio.gather(*(self._try_quantify(trace, criteria) for _ in range(self.config.repeats)))
            runs[label] = [r for r in results if isinstance(r, Judgement)]
            errors += [r for r in results if isinstance(r, str)]
        if errors:
            notes.append(f"{len(errors)} verification answers unusable (first: {errors[0]})")
        if succeeded is None or failed is None:
            notes.append("separation not checked: the run has no " + ("successful" if succeeded is None else "failed")
                         + " episode in this category")
        kept: list[Criterion] = []
        dropped: list[Dropped] = []
        verification: dict[str, Any] = {}
        for criterion in criteria:
            stability = _stability([runs.get(label, []) for label, _ in examples], criterion.name)
            separation = None
            if runs.get("successful") and runs.get("failed"):
                separation = (_mean_score(runs["successful"], criterion.name)
                              - _mean_score(runs["failed"], criterion.name))
            verification[criterion.name] = {"stability": stability, "separation": separation}
            if stability is not None and stability < self.config.min_stability:
                dropped.append(Dropped(criterion=criterion, stability=stability, separation=separation, reason=(
                    f"unstable: the most common value covered {100 * stability:.0f}% of {self.config.repeats} "
                    f"repeats on the same episode (at least {100 * self.config.min_stability:.0f}% needed)")))
            elif separation is not None and separation <= self.config.min_separation:
                dropped.append(Dropped(criterion=criterion, stability=stability, separation=separation, reason=(
                    f"does not separate: the successful example scored {separation:+.2f} against the failed one "
                    f"(more than {self.config.min_separation:+.2f} needed)")))
            else:
                kept.append(criterion)
        return CriteriaSet(domain=domain, category=category, source=source, criteria=tuple(kept),
                           dropped=tuple(dropped), verification=verification, notes=tuple(notes))

    async def _try_quantify(self, trace: EpisodeTrace, criteria: tuple[Criterion, ...]) -> Judgement | str:
        try:
            return await self.quantify(trace, criteria)
        except (JudgeAnswerError, AgentUnitError) as exc:
            return f"{type(exc).__name__}: {str(exc)[:200]}"


_REFUSAL_WORDS = ("i can't", "i cannot", "i'm sorry", "i am sorry", "unable to", "i won't", "i will not")


def _looks_like_refusal(text: str) -> bool:
    head = text.strip().lower()[:200]
    return "{" not in head and any(w in head for w in _REFUSAL_WORDS)


def _stability(groups: list[list[Judgement]], name: str) -> float | None:
    shares = []
    for group in groups:
        values = [j.values[name] for j in group if name in j.values]
        if values:
            shares.append(Counter(values).most_common(1)[0][1] / len(values))
    return sum(shares) / len(shares) if shares else None


def _mean_score(group: list[Judgement], name: str) -> float:
    scores = [j.scores[name] for j in group if name in j.scores]
    return sum(scores) / len(scores) if scores else 0.0


def _domain_text(domain: str) -> str:
    if domain in registry.domain_names():
        d = registry.get_domain(domain)
        return f"{d.title}: {d.description}" if d.description else d.title
    return domain


def _unjudged(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, JudgeAnswerError):
        return exc.kind, str(exc)
    if isinstance(exc, AgentContextLimitError):
        return "context_limit", str(exc)
    if isinstance(exc, ModelAPIError) and ("within" in str(exc) and "Timeout" in str(exc)):
        return "timeout", str(exc)
    return "api_error", str(exc)


def _load_units(run_dir: Path) -> list[tuple[EpisodeRecord, EpisodeTrace]]:
    units = [(r, t) for r, t in iter_records(run_dir) if t is not None and r.status not in NOT_MEASURED]
    units.sort(key=lambda u: u[0].key)
    return units


def _examples(units: list[tuple[EpisodeRecord, EpisodeTrace]]) -> tuple[EpisodeTrace | None, EpisodeTrace | None]:
    succeeded = next((t for _, t in units if t.score is not None and t.score.success), None)
    failed = next((t for _, t in units if not (t.score is not None and t.score.success)), None)
    return succeeded, failed


async def _criteria_set(judge: Judge, domain: str, category: str,
                        units: list[tuple[EpisodeRecord, EpisodeTrace]]) -> CriteriaSet:
    succeeded, failed = _examples(units)
    choice = judge.config.criteria
    notes: list[str] = []
    source: Literal["critic", "file", "bundled"]
    if isinstance(choice, Path):
        source, criteria = "file", pick(load_criteria_file(choice), domain, category)
        if not criteria:
            notes.append(f"{choice} has no criteria for {domain}/{category}: goal fidelity only")
    elif choice == "bundled":
        source, criteria = "bundled", pick({domain: bundled_criteria(domain)}, domain, category)
        if not criteria:
            notes.append(f"domain {domain} bundles no criteria: goal fidelity only")
    else:
        source = "critic"
        try:
            criteria = await judge.propose(domain, category, succeeded, failed)
        except (JudgeAnswerError, AgentUnitError) as exc:
            criteria = pick({domain: bundled_criteria(domain)}, domain, category)
            source = "bundled"
            notes.append(f"the critic gave no usable criteria ({str(exc)[:200]}); "
                         + ("using the bundled defaults" if criteria else "goal fidelity only"))
    if not criteria:
        return CriteriaSet(domain=domain, category=category, source=source, notes=tuple(notes))
    return await judge.verify(domain, category, source, criteria, succeeded, failed, notes)


async def judge_run(run_dir: Path, config: JudgeConfig, *, progress: ProgressFn | None = None) -> JudgeOutcome:
    """Judge every episode of the run in ``run_dir`` that is not judged yet.

    Criteria sets already in ``judge/criteria.json`` are reused (a resumed or extended run
    gets sets only for its new (domain, category) pairs); judged episodes are never sent again.

    Raises:
        ConfigError: not a run directory, or the run was judged by another model or criteria choice.
    """
    started = time.perf_counter()
    paths = RunPaths(run_dir)
    if not paths.episodes.exists():
        raise ConfigError(f"{run_dir} is not a run directory (no episodes.jsonl); give the --output of an eval.")
    folder = judge_dir(run_dir)
    folder.mkdir(exist_ok=True)
    stored = read_criteria(run_dir)
    choice = str(config.criteria)
    if stored is not None and (stored.get("judge") != config.label or stored.get("criteria_choice") != choice):
        raise ConfigError(
            f"{run_dir} was judged by {stored.get('judge')} with criteria {stored.get('criteria_choice')}; judge it "
            f"with the same options, or move {folder} aside to judge it afresh with {config.label}.")
    sets: dict[str, CriteriaSet] = {}
    for raw in (stored or {}).get("sets", []):
        item = CriteriaSet.model_validate(raw)
        sets[item.key] = item
    units = _load_units(run_dir)
    groups: dict[tuple[str, str], list[tuple[EpisodeRecord, EpisodeTrace]]] = {}
    for unit in units:
        groups.setdefault((unit[1].domain, unit[1].category), []).append(unit)
    judge = Judge(config)
    outcome = JudgeOutcome()
    missing = [(d, c) for d, c in groups if f"{d}/{c}" not in sets]
    for made in await asyncio.gather(*(_criteria_set(judge, d, c, groups[(d, c)]) for d, c in missing)):
        sets[made.key] = made
        outcome.new_sets.append(made.key)
    if missing or stored is None:
        _write_criteria(run_dir, config, sets, judge.usage, stored)
    done = {k for k, v in read_judged(run_dir).items() if v.status == "judged"}
    todo = [u for u in units if u[0].key not in done]
    outcome.skipped = len(units) - len(todo)
    with (folder / "judged.jsonl").open("a", encoding="utf-8") as out:
        async def one(record: EpisodeRecord, trace: EpisodeTrace) -> None:
            line = await _judge_one(judge, record, trace, sets[f"{trace.domain}/{trace.category}"])
            out.write(line.model_dump_json() + "\n")
            out.flush()
            if line.status == "judged":
                outcome.judged += 1
            else:
                outcome.unjudged += 1
            if progress is not None:
                progress(line, outcome.judged + outcome.unjudged, len(todo))

        await asyncio.gather(*(one(r, t) for r, t in todo))
    outcome.elapsed_s = time.perf_counter() - started
    return outcome


async def _judge_one(judge: Judge, record: EpisodeRecord, trace: EpisodeTrace,
                     criteria_set: CriteriaSet) -> JudgedEpisode:
    base: dict[str, Any] = {
        "key": record.key, "episode_id": trace.episode_id, "domain": trace.domain, "category": trace.category,
        "judge": judge.config.label, "criteria_set": criteria_set.key,
        "success": bool(trace.score is not None and trace.score.success), "judged_at": time.time()}
    try:
        result = await judge.quantify(trace, criteria_set.criteria)
    except (JudgeAnswerError, AgentUnitError) as exc:
        kind, message = _unjudged(exc)
        return JudgedEpisode(**base, status="unjudged", error=message[:500], error_kind=kind)
    return JudgedEpisode(**base, status="judged", goal_fidelity=result.goal_fidelity, achieved=result.achieved,
                         values=result.values, scores=result.scores, reason=result.reason, usage=result.usage)


def _write_criteria(run_dir: Path, config: JudgeConfig, sets: dict[str, CriteriaSet], usage: Usage,
                    stored: dict[str, Any] | None) -> None:
    previous = Usage.model_validate((stored or {}).get("usage") or {})
    data = {
        "judge_version": JUDGE_VERSION,
        "judge": config.label,
        "base_url": config.model.base_url,
        "temperature": config.model.temperature,
        "criteria_choice": str(config.criteria),
        "verifier": {"repeats": config.repeats, "min_stability": config.min_stability,
                     "min_separation": config.min_separation},
        "prompts": {"critic": CRITIC_SYSTEM, "quantifier": QUANTIFIER_SYSTEM},
        "usage": _add(previous, usage).model_dump(),
        "sets": [s.model_dump(mode="json") for s in sorted(sets.values(), key=lambda s: s.key)],
    }
    path = judge_dir(run_dir) / "criteria.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


__all__ = ["Judge", "JudgeConfig", "JudgeOutcome", "JudgedEpisode", "judge_dir", "judge_run", "parse_judge_spec",
           "read_criteria", "read_judged"]
