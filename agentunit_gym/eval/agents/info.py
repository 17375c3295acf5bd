"""The keys the evaluator adds to ``info``, and the readers that check them.

An env copy under the evaluator runs in :class:`~agentunit_gym.eval.run.schedule.ScheduleEpisodes`,
which reports every reset and step as one :class:`~agentunit_gym.eval.run.schedule.Packet`. The
packet's ``info`` is the stack's own (:class:`~agentunit_gym.wrappers.keys.WrappedResetInfo`,
:class:`~agentunit_gym.wrappers.keys.WrappedStepInfo`) plus the evaluator's keys:

- :class:`EvalResetInfo`: ``seed`` (always) and ``reference_actions`` (only for an agent that
  asks for the reference solution, ``needs_reference = True``);
- :class:`EvalStepInfo`: ``aborted`` (always): whether the evaluator ended the episode from
  outside (an agent failure, a deadline) instead of running a reply.

Agents receive these keys in ``reset(info)`` and ``act(observation, info)`` (a plain
``dict``: an agent is user code); they read them through :func:`reference_actions` and
:func:`reset_seed`, which refuse a value of the wrong type with a
:class:`~agentunit_gym.errors.ConfigError` rather than replaying or seeding from it.
:func:`eval_reset_info` and :func:`eval_step_info` are the one place the keys are written.
docs/agents.md ("Info keys the evaluator adds") is the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from agentunit_gym.core.info import SEED_KEY, reset_seed
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo

REFERENCE_KEY = "reference_actions"
"""The reset-``info`` key carrying the reference solution, written as the agent would send it."""



class _SeedKey(TypedDict):
    seed: int
    """The seed the episode's env was reset with (a hash of the run seed, the env, the task and
    the repeat: docs/eval.md), for agents that sample (``random``)."""


class _ReferenceKey(TypedDict, total=False):
    reference_actions: list[str]
    """The task's reference solution, each step rendered with ``render_action`` in the env's
    grammar (a step known only during the episode is an
    :class:`~agentunit_gym.core.reference.OutputReply`, a ``str``); present only for an agent
    whose ``needs_reference`` is true."""


class EvalResetInfo(WrappedResetInfo, _SeedKey, _ReferenceKey):
    """A reset's ``info`` under the evaluator: the stack's, ``seed``, and, for an agent that
    asks, ``reference_actions``."""


class EvalStepInfo(WrappedStepInfo):
    """A step's ``info`` under the evaluator: the stack's and ``aborted``."""

    aborted: bool
    """True on the step with which the evaluator ended the episode from outside (the agent
    failed or ran out of time; no reply ran, the step is ``truncated``), False on every other."""


class NoInfo(TypedDict):
    """The ``info`` of a packet that carries none (an idle copy, an infrastructure or task error)."""


PacketInfo = EvalResetInfo | EvalStepInfo | NoInfo
"""What :attr:`Packet.info <agentunit_gym.eval.run.schedule.Packet.info>` holds, by the packet's kind."""


def eval_reset_info(info: dict[str, Any], seed: int, reference: Sequence[str] | None = None) -> EvalResetInfo:
    """The evaluator's reset ``info``: the stack's ``info`` (updated in place) with ``seed`` and,
    when ``reference`` is given, ``reference_actions``.

    >>> info = eval_reset_info({"task_id": "db-001"}, 7, ["Action: Answer\\nFinal Answer: []"])
    >>> info["seed"], info["reference_actions"]
    (7, ['Action: Answer\\nFinal Answer: []'])
    """
    typed = cast(EvalResetInfo, info)
    typed["seed"] = int(seed)
    if reference is not None:
        typed["reference_actions"] = list(reference)
    return typed


def eval_step_info(info: dict[str, Any] | Mapping[str, Any], *, aborted: bool) -> EvalStepInfo:
    """The evaluator's step ``info``: the stack's ``info`` (a ``dict`` is updated in place) with ``aborted``.

    >>> eval_step_info({"step": 1}, aborted=False)
    {'step': 1, 'aborted': False}
    """
    typed = cast(EvalStepInfo, info if isinstance(info, dict) else dict(info))
    typed["aborted"] = aborted
    return typed


def reference_actions(info: Mapping[str, Any]) -> list[str]:
    """``info["reference_actions"]``, checked: a list of ``str``.

    >>> reference_actions({"reference_actions": ["Act: answer(42)"]})
    ['Act: answer(42)']
    >>> reference_actions({"reference_actions": "Act: answer(42)"})
    Traceback (most recent call last):
    ...
    agentunit_gym.errors.ConfigError: info['reference_actions'] must be a list of str (the task's reference steps, ...

    Raises:
        ConfigError: the key is missing (the evaluator was not asked for it), or not a list of ``str``.
    """
    if REFERENCE_KEY not in info:
        raise ConfigError(
            f"the oracle needs info[{REFERENCE_KEY!r}]: run it through agentunit_gym.eval.run.runner, "
            "or put the task's reference steps, rendered with env.unwrapped.render_action, there."
        )
    actions = info[REFERENCE_KEY]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ConfigError(
            f"info[{REFERENCE_KEY!r}] must be a list of str (the task's reference steps, rendered with "
            f"env.unwrapped.render_action), found {type(actions).__name__}: {actions!r:.200}."
        )
    return list(actions)


__all__ = [
    "REFERENCE_KEY",
    "SEED_KEY",
    "EvalResetInfo",
    "EvalStepInfo",
    "NoInfo",
    "PacketInfo",
    "reset_seed",
    "eval_reset_info",
    "eval_step_info",
    "reference_actions",
]
