"""The shape of ``info``: every key on every reset and step, each with one type.

gymnasium's vector envs batch ``info`` key by key and pick each key's array from the first
copy that reports it: a number makes a numeric array, a dict is batched key by key, anything
else an object array. A key that is ``None`` in one copy and a dict in another crashes the
batch (``'numpy.ndarray' object has no attribute 'get'``) or silently corrupts it, and a key
that is an ``int`` in one copy and a ``float`` in another is truncated. So every key below is
present on every step (or reset) with one type, and "nothing" is an empty dict or an empty
string, never ``None``.

The tables in docs/core.md are the reference for what each key means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.score import Score

FinishField = FinishReason | Literal[""]
"""``info["finish_reason"]``: ``""`` while the episode runs, then a :class:`FinishReason`.
Both are ``str`` (``FinishReason`` is a ``str`` enum): test it with ``if info["finish_reason"]:``
or compare with ``==``."""

LimitField = LimitKind | Literal[""]
"""``info["limit"]``: which limit ended a ``TASK_LIMIT`` episode, ``""`` otherwise."""

RESET_OPTION_KEYS: tuple[str, ...] = ("task_id", "task")
"""The keys ``reset(options=...)`` accepts (gymnasium's vector envs take ``reset_mask`` out
before the options reach a copy)."""


@dataclass(frozen=True)
class StepTiming:
    """Wall-clock time the env spent on a reset or step (not counting the agent).

    Timings are measurements, not state: any two records compare equal, so determinism
    checks (gymnasium's ``check_env`` compares the ``info`` of two seeded runs) compare what
    the env did, not how fast it was.
    """

    env_s: float = field(compare=False)

    def to_dict(self) -> dict[str, float]:
        return {"env_s": self.env_s}


class ActionInfo(TypedDict):
    """``info["action"]`` for a valid reply; ``{}`` for an invalid one."""

    tool: str
    arguments: dict[str, Any]
    form: str


class ActionErrorInfo(TypedDict):
    """``info["action_error"]`` for an invalid reply; ``{}`` for a valid one."""

    reason: str
    """``invalid_format`` or ``invalid_action``."""
    issue: str
    message: str
    hint: str
    """A "Did you mean ...?", ``""`` when there is none."""
    tool: str
    """The tool the reply named, ``""`` when it named none."""
    truncated_reply: bool
    """The model's server cut the reply at its token limit (finish reason ``length``), set by
    :class:`~agentunit_gym.wrappers.classify.ClassifyActions`: still IF, but not a format the
    model chose (docs/metrics.md, ``truncated_reply_rate``)."""


class ScoreInfo(TypedDict):
    """``info["score"]`` on the final step; ``{}`` while the episode runs.

    ``components`` holds the domain metric's parts with stable types: a ``bool`` stays a
    ``bool``, every other number is a ``float``, text is a ``str``, and a part that does not
    apply (``None`` in :class:`~agentunit_gym.core.score.Score`) is left out.
    """

    reward: float
    success: bool
    components: dict[str, float | bool | str]
    detail: str


class _CommonInfo(TypedDict):
    step: int
    """0 at reset, then the number of steps taken in this episode."""
    task_id: str
    max_steps: int
    """The turn limit in force (the task's, the domain's, ``max_steps=``, or ``max_episode_steps``)."""
    finish_reason: FinishField
    timing: StepTiming
    backend_limits_off: str
    """The backend's resource limits that do not apply on this host, and why (``""``: all apply).
    The OS env's local sandbox without a cgroup: ``"memory, cpu: ...; disk: ..."``."""
    """Seconds the env spent (``.env_s``); any two compare equal."""


class ResetInfo(_CommonInfo):
    """What ``reset()`` returns as ``info``."""

    instruction: str
    category: str
    domain: str
    backend: str
    optimal_steps: int
    tools: list[dict[str, Any]]
    grammar: str


class StepInfo(_CommonInfo):
    """What ``step()`` returns as ``info``: every key on every step."""

    action: ActionInfo | dict[str, Any]
    """The parsed action, ``{}`` when the reply was not a valid one."""
    action_error: ActionErrorInfo | dict[str, Any]
    """Why the reply was not a valid action, ``{}`` when it was."""
    thought: str
    """Text before the action, ``""`` when there is none."""
    execution: dict[str, Any]
    """Exit code, timeout, truncation, row count ...; ``{}`` when nothing ran."""
    execution_error: bool
    """Whether the action ran and failed (an agent mistake, shown to the agent)."""
    score: ScoreInfo | dict[str, Any]
    """The episode's score on its final step, ``{}`` before."""
    finish_detail: str
    """Why the episode ended, ``""`` while it runs."""
    limit: LimitField
    """Which limit ended a ``TASK_LIMIT`` episode, ``""`` otherwise."""


def stable_components(components: dict[str, Any]) -> dict[str, float | bool | str]:
    """Score components with one type per kind of value (see :class:`ScoreInfo`).

    ``None`` is left out, ``bool`` and ``str`` kept, other numbers become ``float`` (KG's
    ``executability`` is 0 or 1, an F1 may be ``0`` or ``0.5``: as ``float`` both batch into
    one numeric array without truncation).
    """
    stable: dict[str, float | bool | str] = {}
    for name, value in components.items():
        if value is None:
            continue
        if isinstance(value, (bool, str)):
            stable[name] = value
        elif isinstance(value, (int, float)):
            stable[name] = float(value)
        else:
            stable[name] = str(value)
    return stable


def stable_details(details: dict[str, Any]) -> dict[str, Any]:
    """Execution details without ``None`` values (a missing key batches; ``None`` next to a
    number does not)."""
    return {name: value for name, value in details.items() if value is not None}


def score_info(score: Score) -> ScoreInfo:
    """``info["score"]`` for a :class:`~agentunit_gym.core.score.Score`."""
    return {"reward": float(score.reward), "success": bool(score.success),
            "components": stable_components(dict(score.components)), "detail": score.detail}


def running_step_info(step: int, task_id: str, max_steps: int, env_s: float = 0.0,
                      backend_limits_off: str = "") -> StepInfo:
    """The ``info`` of a step that has not ended the episode, every key at its empty value.
    Wrappers that answer a step themselves (a reply that arrived too late, a prompt over the
    context) start from it too."""
    return {
        "step": step, "task_id": task_id, "max_steps": max_steps, "finish_reason": "",
        "timing": StepTiming(env_s), "backend_limits_off": backend_limits_off,
        "action": {}, "action_error": {}, "thought": "", "execution": {}, "execution_error": False,
        "score": {}, "finish_detail": "", "limit": "",
    }


__all__ = [
    "RESET_OPTION_KEYS",
    "ActionErrorInfo",
    "ActionInfo",
    "FinishField",
    "LimitField",
    "ResetInfo",
    "ScoreInfo",
    "StepInfo",
    "StepTiming",
    "running_step_info",
    "score_info",
    "stable_components",
    "stable_details",
]
