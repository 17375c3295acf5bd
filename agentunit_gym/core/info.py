"""The shape of ``info``: every key on every reset and step, each with one type.

gymnasium's vector envs batch ``info`` key by key and pick each key's array from the first
copy that reports it: a number makes a numeric array, a dict is batched key by key, anything
else an object array. A key that is ``None`` in one copy and a dict in another crashes the
batch (``'numpy.ndarray' object has no attribute 'get'``) or silently corrupts it, and a key
that is an ``int`` in one copy and a ``float`` in another is truncated. So every key below is
present on every step (or reset) with one type, and "nothing" is an empty dict or an empty
string, never ``None``.

The env's keys, each a ``TypedDict`` that mypy checks where the keys are written and read:

- :class:`ResetInfo` and :class:`StepInfo`: what the base env returns (every key, always);
- :class:`EndInfo`: the entries an episode's end sets (``AgentEnv.end_episode``), merged into
  the final step's ``info`` by :func:`merge_end`.

Each wrapper declares the keys it adds in the wrappers' layer (:mod:`agentunit_gym.wrappers.keys`:
``WrappedResetInfo`` and ``WrappedStepInfo`` are these plus the wrappers'). The evaluator adds a
few keys of its own on top (``seed``, ``reference_actions``, ``aborted``:
:mod:`agentunit_gym.eval.agents.info`). The tables in docs/core.md (the env's keys), docs/wrappers.md
(the wrappers' keys) and docs/agents.md (the evaluator's) are the reference for what each key
means.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.score import Score
from agentunit_gym.core.task_pin import STICKY_OPTION
from agentunit_gym.errors import ConfigError

FinishField = FinishReason | Literal[""]
"""``info["finish_reason"]``: ``""`` while the episode runs, then a :class:`FinishReason`.
Both are ``str`` (``FinishReason`` is a ``str`` enum): test it with ``if info["finish_reason"]:``
or compare with ``==``."""

LimitField = LimitKind | Literal[""]
"""``info["limit"]``: which limit ended a ``TASK_LIMIT`` episode, ``""`` otherwise."""

RESET_OPTION_KEYS: tuple[str, ...] = ("task_id", "task", STICKY_OPTION)
"""The keys ``reset(options=...)`` accepts (gymnasium's vector envs take ``reset_mask`` out
before the options reach a copy). ``sticky``: :mod:`agentunit_gym.core.task_pin`."""


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
    """Seconds the env spent (``.env_s``); any two compare equal."""
    backend_limits_off: str
    """The backend's resource limits that do not apply on this host, and why (``""``: all apply).
    The OS env's local sandbox without a cgroup: ``"cpu: ...; disk: ...; memory: ..."``."""


class ResetInfo(_CommonInfo):
    """What ``reset()`` returns as ``info``."""

    instruction: str
    category: str
    domain: str
    backend: str
    """The backend the episode runs on (``sqlite``, ``mysql``, ``local``, ``docker``, ``embedded``
    ...): an env made without ``backend=`` runs on its domain's embedded one on every host."""
    split: str
    """The task's split: ``train`` or ``test`` (bundled and generated tasks), ``dev`` or ``test``
    (AgentBench's data); ``""`` for a task file that names none."""
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


class EndInfo(TypedDict):
    """The entries of an episode's end, as :meth:`AgentEnv.end_episode
    <agentunit_gym.core.env.AgentEnv.end_episode>` returns them; :func:`merge_end` puts them
    into a step's ``info``."""

    finish_reason: FinishReason
    score: ScoreInfo
    finish_detail: str
    limit: LimitField
    """``""`` from the env; the caller that ended the episode for a limit names it."""


SEED_KEY = "seed"
"""The reset-``info`` key carrying the episode's reset seed (written by the evaluator,
:mod:`agentunit_gym.eval.agents.info`; read here so any layer's agent can, domains' baselines too)."""


def reset_seed(info: Mapping[str, Any]) -> int | None:
    """``info["seed"]``, checked: an integer (a numpy one too), or None when ``info`` has none.

    >>> reset_seed({"seed": 3}), reset_seed({})
    (3, None)
    >>> reset_seed({"seed": "3"})
    Traceback (most recent call last):
    ...
    agentunit_gym.errors.ConfigError: info['seed'] must be an int (the episode's reset seed), found str: '3'.

    Raises:
        ConfigError: the seed is not an integer (a ``bool``, a ``float`` or text are refused).
    """
    seed = info.get(SEED_KEY)
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigError(f"info[{SEED_KEY!r}] must be an int (the episode's reset seed), "
                          f"found {type(seed).__name__}: {seed!r:.100}.")
    return int(seed)


def merge_end(info: StepInfo, end: EndInfo) -> None:
    """Put an episode's end entries into a step's ``info`` (in place)."""
    info["finish_reason"] = end["finish_reason"]
    info["score"] = end["score"]
    info["finish_detail"] = end["finish_detail"]
    info["limit"] = end["limit"]


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
    "EndInfo",
    "FinishField",
    "LimitField",
    "ResetInfo",
    "ScoreInfo",
    "StepInfo",
    "StepTiming",
    "merge_end",
    "running_step_info",
    "score_info",
    "stable_components",
    "stable_details",
]
