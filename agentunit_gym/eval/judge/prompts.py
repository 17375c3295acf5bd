"""What the judge sends (the critic's and the quantifier's prompts, an episode as text) and how
its answers are read.

The env's own verdict (``score``, reward) is never shown to the quantifier: the agreement
between the judge's "achieved" and ``score.success`` is only worth reporting if the judge
did not read it. The critic is told which example succeeded, as AgentEval's critic is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentunit_gym.core.trace import EpisodeTrace, Usage
from agentunit_gym.eval.judge.criteria import Criterion

STEP_CAP = 1200
"""Characters of each action and observation shown to the judge (the rest is marked cut)."""

MAX_STEPS_SHOWN = 40
"""Steps shown to the judge; longer episodes show the first and last ones."""

CRITIC_SYSTEM = """\
You help evaluate software agents. Given a task family's description and two recorded \
episodes of an agent (one that the environment's check counted as successful and one it \
counted as failed), propose criteria that tell how well an episode serves the user's goal.

Each criterion needs: a short snake_case name, a one-sentence description of what to look \
for in the transcript, and 2 to 5 accepted values ordered from worst to best. Propose 3 to 6 \
criteria that a reader of the transcript alone can assess, that differ from each other, and \
that would separate good episodes from bad ones.

Reply with one JSON object and nothing else:
{"criteria": [{"name": "...", "description": "...", "accepted_values": ["worst", "...", "best"]}]}"""

QUANTIFIER_SYSTEM = """\
You evaluate one recorded episode of a software agent working on a task. Read the task and \
the transcript (the agent's actions and what the environment answered), then judge:

- goal_fidelity: a number from 0 to 1, how far the episode's outcome does what the user \
meant (1: fully, 0: not at all), judged from the transcript.
- achieved: true if the user's goal was achieved, false otherwise.
- one value per criterion, copied exactly from that criterion's accepted values.
- reason: two or three sentences on what decided your judgement.

Reply with one JSON object and nothing else:
{"goal_fidelity": 0.0, "achieved": false, "criteria": {"<criterion name>": "<accepted value>"}, "reason": "..."}"""


def _cut(text: str, cap: int = STEP_CAP) -> str:
    return text if len(text) <= cap else text[:cap] + f"\n[... {len(text) - cap} more characters cut]"


def transcript(trace: EpisodeTrace) -> str:
    """An episode as the judge reads it: the task, every step's action and observation (capped),
    and how the episode ended (the finish reason, never the score)."""
    lines = [f"Task ({trace.domain}, category {trace.category}):", _cut(trace.instruction or trace.prompt, 4000), ""]
    steps = trace.steps
    shown = steps if len(steps) <= MAX_STEPS_SHOWN else [*steps[: MAX_STEPS_SHOWN // 2], *steps[-MAX_STEPS_SHOWN // 2:]]
    previous = 0
    for step in shown:
        if step.index != previous + 1:
            lines.append(f"[... steps {previous + 1}-{step.index - 1} not shown]")
        previous = step.index
        lines.append(f"Step {step.index}, agent:\n{_cut(step.raw_action)}")
        lines.append(f"Step {step.index}, environment:\n{_cut(step.observation)}")
    reason = trace.finish_reason.value if trace.finish_reason else "unknown"
    lines.append(f"The episode ended after {len(steps)} steps (end: {reason}).")
    return "\n".join(lines)


def critic_messages(domain_text: str, category: str, succeeded: EpisodeTrace | None,
                    failed: EpisodeTrace | None) -> list[dict[str, Any]]:
    """The critic's conversation for one (domain, category)."""
    parts = [f"Task family: {domain_text}", f"Category: {category}", ""]
    if succeeded is not None:
        parts += ["Episode counted as SUCCESSFUL:", transcript(succeeded), ""]
    if failed is not None:
        parts += ["Episode counted as FAILED:", transcript(failed), ""]
    return [{"role": "system", "content": CRITIC_SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def quantifier_messages(trace: EpisodeTrace, criteria: tuple[Criterion, ...]) -> list[dict[str, Any]]:
    """The quantifier's conversation for one episode under ``criteria``."""
    listed = "\n".join(f"- {c.name}: {c.description} Accepted values (worst to best): "
                       + json.dumps(list(c.accepted_values), ensure_ascii=False) for c in criteria)
    content = f"Criteria:\n{listed or '(none: judge goal_fidelity and achieved only)'}\n\n{transcript(trace)}"
    return [{"role": "system", "content": QUANTIFIER_SYSTEM}, {"role": "user", "content": content}]


class JudgeAnswerError(ValueError):
    """The judge's reply is not an answer of the asked shape (garbage, or a refusal).

    Attributes:
        kind: ``garbage`` or ``refused``.
        usage: the tokens the call that produced the reply used (a garbage answer costs too).
    """

    def __init__(self, message: str, kind: str = "garbage", usage: Usage | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.usage = usage


CRITERIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"criteria": {"type": "array", "minItems": 1, "maxItems": 10, "items": {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_ -]+$", "maxLength": 80},
                       "description": {"type": "string"},
                       "accepted_values": {"type": "array", "items": {"type": "string"},
                                           "minItems": 2, "maxItems": 10}},
        "required": ["name", "description", "accepted_values"], "additionalProperties": False}}},
    "required": ["criteria"], "additionalProperties": False,
}
"""The JSON schema of the critic's answer (sent as ``response_format`` where the server takes it)."""


def judgement_schema(criteria: tuple[Criterion, ...]) -> dict[str, Any]:
    """The JSON schema of the quantifier's answer for these criteria: each criterion one of its
    accepted values (sent as ``response_format`` where the server takes it; the answer is read
    by :func:`parse_judgement` either way)."""
    return {
        "type": "object",
        "properties": {
            "goal_fidelity": {"type": "number", "minimum": 0, "maximum": 1},
            "achieved": {"type": "boolean"},
            "criteria": {"type": "object",
                         "properties": {c.name: {"type": "string", "enum": list(c.accepted_values)} for c in criteria},
                         "required": [c.name for c in criteria], "additionalProperties": False},
            "reason": {"type": "string"},
        },
        "required": ["goal_fidelity", "achieved", "criteria", "reason"], "additionalProperties": False,
    }


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's reply: the whole text, a fenced block, or the outermost braces.

    Raises:
        JudgeAnswerError: no JSON object in it.
    """
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise JudgeAnswerError(f"no JSON object in the reply: {text[:200]!r}")


def parse_criteria(text: str) -> tuple[Criterion, ...]:
    """The critic's criteria (malformed ones are skipped; duplicates keep the first).

    Raises:
        JudgeAnswerError: no usable criterion in the reply.
    """
    data = parse_json_object(text)
    raw = data.get("criteria")
    if not isinstance(raw, list):
        raise JudgeAnswerError("the critic's reply has no 'criteria' list")
    out: dict[str, Criterion] = {}
    for item in raw:
        try:
            criterion = Criterion.model_validate(item)
        except ValueError:
            continue
        out.setdefault(criterion.name, criterion)
    if not out:
        raise JudgeAnswerError("the critic proposed no well-formed criterion")
    return tuple(out.values())


@dataclass(frozen=True)
class Judgement:
    """The quantifier's answer for one episode."""

    goal_fidelity: float
    achieved: bool
    values: dict[str, str]
    """criterion name -> the accepted value given."""
    scores: dict[str, float]
    """criterion name -> that value's 0-1 score."""
    reason: str
    usage: Usage = field(default_factory=Usage)
    """Tokens and cost of the call that produced it."""


def parse_judgement(text: str, criteria: tuple[Criterion, ...]) -> Judgement:
    """Read a quantifier reply strictly: every field present and in range, every criterion given
    one of its accepted values.

    Raises:
        JudgeAnswerError: anything else (the episode is then recorded as unjudged).
    """
    data = parse_json_object(text)
    fidelity = data.get("goal_fidelity")
    if isinstance(fidelity, bool) or not isinstance(fidelity, (int, float)) or not 0.0 <= float(fidelity) <= 1.0:
        raise JudgeAnswerError(f"goal_fidelity must be a number in [0, 1], got {fidelity!r}")
    achieved = data.get("achieved")
    if not isinstance(achieved, bool):
        raise JudgeAnswerError(f"achieved must be true or false, got {achieved!r}")
    given = data.get("criteria") or {}
    if not isinstance(given, dict):
        raise JudgeAnswerError("criteria must be an object of name -> accepted value")
    values: dict[str, str] = {}
    scores: dict[str, float] = {}
    for criterion in criteria:
        value = given.get(criterion.name)
        score = criterion.score(value) if isinstance(value, str) else None
        if score is None:
            raise JudgeAnswerError(f"criterion {criterion.name!r}: {value!r} is not one of "
                                   f"{list(criterion.accepted_values)}")
        values[criterion.name] = str(value)
        scores[criterion.name] = score
    return Judgement(float(fidelity), achieved, values, scores, str(data.get("reason", ""))[:2000])


__all__ = ["CRITERIA_SCHEMA", "CRITIC_SYSTEM", "QUANTIFIER_SYSTEM", "JudgeAnswerError", "Judgement", "critic_messages",
           "judgement_schema",
           "parse_criteria", "parse_judgement", "quantifier_messages", "transcript"]
