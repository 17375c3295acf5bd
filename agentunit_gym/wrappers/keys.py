"""The ``info`` keys the wrappers add, each wrapper's under its own name.

The base env's keys are the core's (:class:`~agentunit_gym.core.info.StepInfo`,
:class:`~agentunit_gym.core.info.ResetInfo`); each wrapper of the evaluation stack declares
here what it adds, as a ``TypedDict`` named after it (``ClassifyActionsKeys`` ...), and
:class:`WrappedStepInfo` / :class:`WrappedResetInfo` are the env's keys plus every wrapper's.
A key is present exactly when its wrapper is in the stack, then on every step (or reset) with
one type (docs/wrappers.md, "Info keys the wrappers add"). A new wrapper adds its class here
and to the two unions; ``tests/wrappers/test_protocol.py`` checks that the standard stack
emits exactly the declared keys.

They live in one module rather than beside each wrapper because every wrapper reads the
whole shape (:func:`agentunit_gym.wrappers.info.step_info`), which would make the wrapper
modules import one another.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from agentunit_gym.core.info import ResetInfo, StepInfo
from agentunit_gym.core.trace import EpisodeTrace, Flag

ReplyClass = Literal["action", "invalid_format", "invalid_action", "skipped"]
"""``info["reply_class"]`` (``ClassifyActions``): a valid action, the two invalid classes, or a
reply a limit wrapper did not run (it arrived after the deadline or the prompt overflowed)."""


class FlagKeys(TypedDict, total=False):
    """Every wrapper: its per-step flags, in order, no duplicates (``add_flags``)."""

    flags: list[Flag]


class ClassifyActionsKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.classify.ClassifyActions`, on every step."""

    reply_class: ReplyClass
    """What kind of reply this step's was."""
    invalid_count: int
    """Invalid replies so far in the episode."""


class ClassifyActionsResetKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.classify.ClassifyActions`, on reset."""

    invalid_policy: str
    """``continue`` or ``terminate``."""


class TrapInfo(TypedDict):
    """``info["trap"]`` (``InjectTraps``) when the episode has a trap; ``{}`` when it has none."""

    trap_id: str
    placement: str
    """``prompt`` or ``observation``."""
    verdict: str
    """``refused`` or ``attempted`` (final once the episode ended)."""
    evidence: list[str]
    category: str
    delivered: bool
    """Whether the trap's text has reached the agent yet (an ``observation`` trap waits for its step)."""


class InjectTrapsKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.traps.InjectTraps`, on reset and every step."""

    trap: TrapInfo | dict[str, Any]
    """The episode's trap and its verdict so far, ``{}`` without one."""


class DetectLoopsKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.loops.DetectLoops`, on every step."""

    loop: str
    """The loop this step closes, ``""`` when none."""
    loop_count: int
    """Loops so far in the episode."""


class SkippedReplyKeys(TypedDict, total=False):
    """``LimitEpisode`` and ``LimitContext``, on a step whose reply they did not run."""

    skipped: str
    """Why the reply was not run (it came after the deadline, or the prompt alone overflows
    the context); absent when it ran."""


class LimitEpisodeResetKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.limits.LimitEpisode`, on reset."""

    step_limit: int
    """The turn limit it enforces."""
    time_limit_s: float | None
    """The wall-clock limit, None for none."""


class LimitContextKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.context.LimitContext`, on every step (and reset)."""

    context_tokens: int
    """The conversation's size so far, by its counter."""
    context_counter: str
    """The counter's name."""


class LimitContextResetKeys(LimitContextKeys, total=False):
    """:class:`~agentunit_gym.wrappers.context.LimitContext`, on reset."""

    max_context_tokens: int
    """The context size it enforces."""


class RecordTraceKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.trace.RecordTrace`, on the final step only."""

    trace: EpisodeTrace
    """The finished trace."""


class RenameToolsResetKeys(TypedDict, total=False):
    """:class:`~agentunit_gym.wrappers.aliases.RenameTools`, on reset."""

    protocol_tools: bool
    """``tools`` holds another release's schemas."""


class WrappedStepInfo(StepInfo, FlagKeys, ClassifyActionsKeys, InjectTrapsKeys, DetectLoopsKeys, SkippedReplyKeys,
                      LimitContextKeys, RecordTraceKeys):
    """A step's ``info`` under the evaluation wrappers: :class:`~agentunit_gym.core.info.StepInfo`'s
    keys, always, and the wrappers' keys, when their wrapper is in the stack. What the hooks of
    :class:`~agentunit_gym.wrappers.base.EpisodeWrapper` receive and return."""


class WrappedResetInfo(ResetInfo, ClassifyActionsResetKeys, InjectTrapsKeys, LimitEpisodeResetKeys,
                       LimitContextResetKeys, RenameToolsResetKeys):
    """The reset ``info`` under the evaluation wrappers."""
