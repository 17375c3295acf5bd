"""Helpers the wrappers share: reaching the AgentUnit env under a stack and the per-step
``info["flags"]`` list (ending an episode lives in :mod:`agentunit_gym.wrappers.ending`).

Every wrapper adds its flags to ``info["flags"]`` (a list of :class:`Flag`, no duplicates),
so a flag set by an inner wrapper reaches the trace recorder at the top of the stack.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, cast

import gymnasium as gym

from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.info import running_step_info
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo

FLAGS_KEY = "flags"


def agent_env(env: gym.Env[Any, Any]) -> AgentEnv[Any]:
    """The :class:`AgentEnv` at the bottom of a wrapper stack.

    Raises:
        ConfigError: the stack does not end in an AgentUnit env.
    """
    base = env.unwrapped
    if not isinstance(base, AgentEnv):
        from agentunit_gym.core.registry import env_ids

        raise ConfigError(
            f"this wrapper needs an AgentUnit env (an AgentEnv subclass) at the bottom of the stack, "
            f"found {type(base).__name__}; make one with gym.make() of a registered id ({', '.join(env_ids())})."
        )
    return base


def step_info(info: dict[str, Any]) -> WrappedStepInfo:
    """The ``info`` a wrapper's ``self.env.step`` returned, with its type back: gymnasium types
    every ``info`` as ``dict[str, Any]``; under an AgentUnit env it is a
    :class:`~agentunit_gym.wrappers.keys.WrappedStepInfo` (the base env builds every step's from
    ``running_step_info``). The one place the stack's step ``info`` is given its type."""
    return cast(WrappedStepInfo, info)


def reset_info(info: dict[str, Any]) -> WrappedResetInfo:
    """The ``info`` a wrapper's ``self.env.reset`` returned, with its type back (see :func:`step_info`)."""
    return cast(WrappedResetInfo, info)


def skipped_step_info(step: int, task_id: str, max_steps: int, why: str, *,
                      backend_limits_off: str = "") -> WrappedStepInfo:
    """The ``info`` of a step whose reply a wrapper did not run (``reply_class`` ``skipped``,
    ``skipped`` saying why): every key of a running step at its empty value, except
    ``backend_limits_off`` (the env's, which holds for every step)."""
    info = step_info(dict(running_step_info(step, task_id, max_steps, backend_limits_off=backend_limits_off)))
    info["skipped"] = why
    info["reply_class"] = "skipped"
    return info


def add_flags(info: WrappedStepInfo, *flags: Flag) -> None:
    """Append ``flags`` to ``info["flags"]``, keeping the order and dropping duplicates."""
    current: list[Flag] = list(info.get("flags") or [])
    for flag in flags:
        if flag not in current:
            current.append(flag)
    info["flags"] = current


def derive_flags(info: Mapping[str, Any]) -> list[Flag]:
    """Flags that follow from the base env's own ``info`` keys (no wrapper needed).

    Invalid replies give INVALID_FORMAT / INVALID_ACTION (plus HALLUCINATION for an unknown
    tool); a failed execution gives EXECUTION_ERROR; a command that hit its timeout gives
    TIMEOUT and cut output gives TRUNCATED; a context-limit end gives CONTEXT_LIMIT.
    """
    flags: list[Flag] = []
    error = info.get("action_error")
    if isinstance(error, dict) and error:
        if error.get("reason") == FinishReason.INVALID_FORMAT.value:
            flags.append(Flag.INVALID_FORMAT)
        else:
            flags.append(Flag.INVALID_ACTION)
        if error.get("issue") == "unknown_tool":
            flags.append(Flag.HALLUCINATION)
    if info.get("execution_error"):
        flags.append(Flag.EXECUTION_ERROR)
    execution = info.get("execution")
    if isinstance(execution, dict):
        # Backends name these ``timed_out``/``truncated`` (ExecResult, QueryResult); accept ``timeout`` too.
        if execution.get("timed_out") or execution.get("timeout") is True:
            flags.append(Flag.TIMEOUT)
        if execution.get("truncated"):
            flags.append(Flag.TRUNCATED)
    if info.get("finish_reason") is FinishReason.CONTEXT_LIMIT:
        flags.append(Flag.CONTEXT_LIMIT)
    return flags


def action_text(info: Mapping[str, Any]) -> str | None:
    """The text of the parsed action's arguments (the command, the SQL, the answer), or None.

    Trap patterns and loop detection read this rather than the raw reply, so the agent's
    reasoning around the action neither triggers nor hides a match.
    """
    action = info.get("action")
    if not isinstance(action, dict) or not action:  # {}: the reply was not a valid action
        return None
    arguments = action.get("arguments") or {}
    parts = [str(v) for v in arguments.values()] if isinstance(arguments, dict) else [str(arguments)]
    return "\n".join(parts)


_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Collapse whitespace and case so trivially different spellings compare equal."""
    return _SPACE.sub(" ", text).strip().lower()


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` made only of JSON types, so a trace always serialises and round-trips.

    Enums become their value, unknown objects their ``str``, non-finite floats strings
    (pydantic writes NaN as null, which would not read back equal).
    """
    if _depth > 20:
        return str(value)
    if isinstance(value, Enum):
        return jsonable(value.value, _depth + 1)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return str(value)  # plain str, also for str subclasses such as AgentReply
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    if isinstance(value, numbers.Integral):  # numpy integers and the like
        return int(value)
    if isinstance(value, numbers.Real):
        return jsonable(float(value), _depth + 1)
    return str(value)


def unique(items: Iterable[Flag]) -> tuple[Flag, ...]:
    """Flags in first-seen order without duplicates."""
    seen: list[Flag] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return tuple(seen)
