"""Judge a recorded run: criteria per (domain, category), verified, then every episode quantified.

Files, under ``RUN_DIR/judge/``:

- ``criteria.json``: the judge model, its endpoint, the prompts, the verifier's settings, and
  per (domain, category) the criteria kept, the ones dropped with the reason, and how stable
  and how separating each was.
- ``judged.jsonl``: one line per episode judged (or that the judge failed on: ``unjudged``,
  with the reason; such episodes are tried again on the next ``judge`` of the run, judged
  ones never are).

Example (not run: it needs a judge model endpoint)::

    config = JudgeConfig(OpenAIConfig(model="gpt-4o-mini"))
    outcome = asyncio.run(judge_run(Path("results/my-run"), config))
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Literal

from agentunit_gym.core.trace import EpisodeTrace, Usage
from agentunit_gym.errors import AgentContextLimitError, AgentUnitError, ConfigError
from agentunit_gym.eval.agents.model_client import ModelAPIError
from agentunit_gym.eval.judge.criteria import CriteriaSet, bundled_criteria, load_criteria_file, pick
from agentunit_gym.eval.judge.files import (
    EXIT_NOTHING_JUDGED,
    JUDGE_VERSION,
    JudgeConfig,
    JudgedEpisode,
    JudgeOutcome,
    ProgressFn,
    judge_dir,
    parse_judge_spec,
    read_criteria,
    read_judged,
)
from agentunit_gym.eval.judge.judge import Judge, add_usage, rejects_response_format
from agentunit_gym.eval.judge.prompts import CRITIC_SYSTEM, QUANTIFIER_SYSTEM, JudgeAnswerError
from agentunit_gym.eval.record.records import NOT_MEASURED, EpisodeRecord, RunPaths, iter_records


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
        _write_criteria(run_dir, config, sets, judge.usage, stored, judge.reply_format)
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
    outcome.reply_format = judge.reply_format
    outcome.usage = judge.usage
    _write_criteria(run_dir, config, sets, judge.usage, stored, judge.reply_format)
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
        usage = exc.usage if isinstance(exc, JudgeAnswerError) and exc.usage is not None else Usage()
        return JudgedEpisode(**base, status="unjudged", error=message[:500], error_kind=kind, usage=usage)
    return JudgedEpisode(**base, status="judged", goal_fidelity=result.goal_fidelity, achieved=result.achieved,
                         values=result.values, scores=result.scores, reason=result.reason, usage=result.usage)


def _write_criteria(run_dir: Path, config: JudgeConfig, sets: dict[str, CriteriaSet], usage: Usage,
                    stored: dict[str, Any] | None, reply_format: str) -> None:
    previous = Usage.model_validate((stored or {}).get("usage") or {})
    if reply_format == "unknown":
        reply_format = str((stored or {}).get("reply_format", "unknown"))
    data = {
        "judge_version": JUDGE_VERSION,
        "judge": config.label,
        "base_url": config.model.base_url,
        "temperature": config.model.temperature,
        "criteria_choice": str(config.criteria),
        "verifier": {"repeats": config.repeats, "min_stability": config.min_stability,
                     "min_separation": config.min_separation},
        "prompts": {"critic": CRITIC_SYSTEM, "quantifier": QUANTIFIER_SYSTEM},
        "reply_format": reply_format,
        "usage": add_usage(previous, usage).model_dump(),
        "sets": [s.model_dump(mode="json") for s in sorted(sets.values(), key=lambda s: s.key)],
    }
    path = judge_dir(run_dir) / "criteria.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(path)


__all__ = ["EXIT_NOTHING_JUDGED", "Judge", "JudgeConfig", "JudgeOutcome", "JudgedEpisode", "ProgressFn", "judge_dir",
           "judge_run", "parse_judge_spec", "read_criteria", "read_judged", "rejects_response_format"]
