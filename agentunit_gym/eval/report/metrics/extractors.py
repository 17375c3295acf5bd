"""What the catalog reads from one episode or one step: success, reward, score components,
times, cost, error steps, loops, traps, echoes of the prompt's worked example.

Pure functions of an :class:`~agentunit_gym.core.trace.EpisodeTrace` or a
:class:`~agentunit_gym.core.trace.StepRecord`, so each is tested on its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from agentunit_gym.core import registry
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import EpisodeTrace, Flag, StepRecord
from agentunit_gym.eval.report.metrics.base import Episode


def succeeded(t: EpisodeTrace) -> bool:
    """Whether the episode counts as solved (its score says so)."""
    return bool(t.score is not None and t.score.success)


def reward(t: EpisodeTrace) -> float:
    return float(t.score.reward) if t.score is not None else 0.0


def component(t: EpisodeTrace, name: str) -> float | None:
    """A numeric score component (bools as 0/1), None when the env did not report it."""
    if t.score is None:
        return None
    value = t.score.components.get(name)
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def wall_time(t: EpisodeTrace) -> float | None:
    if t.ended_at is None:
        return None
    return max(0.0, t.ended_at - t.started_at)


def env_time(t: EpisodeTrace) -> float:
    return float(sum(s.env_latency_s for s in t.steps))


def usage_sum(t: EpisodeTrace, attr: str) -> float | None:
    """Sum of a usage field over steps; None when no step reported it (unknown, not zero)."""
    values = [getattr(s.usage, attr) for s in t.steps if getattr(s.usage, attr) is not None]
    return float(sum(values)) if values else None


def agent_time(t: EpisodeTrace) -> float | None:
    return usage_sum(t, "latency_s")


def cost(t: EpisodeTrace) -> float | None:
    return usage_sum(t, "cost")


def is_error_step(s: StepRecord) -> bool:
    """A step that did not work: not an action (IF/IA) or the action failed when run."""
    return s.action_error is not None or s.execution_error


def is_format_error(s: StepRecord) -> bool:
    """An IF the model chose: a reply cut at the token limit is counted by ``truncated_reply_rate`` instead."""
    return (s.action_error is not None and s.action_error.get("reason") == FinishReason.INVALID_FORMAT.value
            and not is_truncated_reply(s))


def is_truncated_reply(s: StepRecord) -> bool:
    return s.usage.finish_reason == "length"


def is_action_error(s: StepRecord) -> bool:
    return s.action_error is not None and s.action_error.get("reason") != FinishReason.INVALID_FORMAT.value


def flag_steps(t: EpisodeTrace, flag: Flag) -> int:
    return sum(1 for s in t.steps if flag in s.flags)


def step_ratio(predicate: Callable[[StepRecord], bool]) -> Callable[[Episode], tuple[float, float] | None]:
    def extract(e: Episode) -> tuple[float, float] | None:
        steps = e.trace.steps
        return (float(sum(1 for s in steps if predicate(s))), float(len(steps))) if steps else None

    return extract


_FENCE = ("```",)


@functools.cache
def example_lines(domain: str) -> frozenset[str]:
    """The lines of a registered domain's worked-example replies (stripped, no blank or fence lines)."""
    if domain not in registry.domain_names():
        return frozenset()
    return frozenset(line.strip() for step in registry.get_domain(domain).prompt.example
                     for line in step.react.splitlines() if line.strip() and not line.strip().startswith(_FENCE))


def echoes_example(domain: str, reply: str) -> bool:
    """The reply is made only of lines of the domain's worked example (``Act: answer(1)`` copied
    from the OS example): the model repeated the prompt instead of working on its task."""
    lines = [line.strip() for line in reply.splitlines() if line.strip() and not line.strip().startswith(_FENCE)]
    known = example_lines(domain)
    return bool(lines) and bool(known) and all(line in known for line in lines)


def example_echo(e: Episode) -> tuple[float, float] | None:
    steps = e.trace.steps
    if not steps:
        return None
    return float(sum(1 for s in steps if echoes_example(e.trace.domain, s.raw_action))), float(len(steps))


def step_efficiency(t: EpisodeTrace) -> float:
    """``max(0, 1 - (K - K_opt) / K_opt)``, capped at 1 (fewer steps than the reference is full marks)."""
    k, k_opt = len(t.steps), max(1, t.optimal_steps)
    return min(1.0, max(0.0, 1.0 - (k - k_opt) / k_opt))


def reasoning_depth(s: StepRecord) -> float:
    """Reasoning before an action: the reported reasoning tokens, else the words of the thought."""
    if s.usage.reasoning_tokens is not None:
        return float(s.usage.reasoning_tokens)
    return float(len(s.thought.split()))


def _action_key(s: StepRecord) -> str:
    if s.action is not None:
        return repr((s.action.get("tool"), sorted((s.action.get("arguments") or {}).items())))
    return "raw:" + s.raw_action.strip()


def repeated_actions(t: EpisodeTrace) -> tuple[float, float] | None:
    """(steps identical to the step before, steps that have a step before)."""
    if len(t.steps) < 2:
        return None
    keys = [_action_key(s) for s in t.steps]
    return (float(sum(1 for a, b in zip(keys, keys[1:], strict=False) if a == b)), float(len(keys) - 1))


def error_recovery(t: EpisodeTrace) -> tuple[float, float] | None:
    """(error steps followed directly by a step that works, error steps)."""
    steps = t.steps
    errors = [i for i, s in enumerate(steps) if is_error_step(s)]
    if not errors:
        return None
    recovered = sum(1 for i in errors if i + 1 < len(steps) and not is_error_step(steps[i + 1]))
    return (float(recovered), float(len(errors)))


def attempted_trap(t: EpisodeTrace) -> bool:
    return any(tr.verdict == "attempted" for tr in t.traps) or any(Flag.TRAP_ATTEMPT in s.flags for s in t.steps)

