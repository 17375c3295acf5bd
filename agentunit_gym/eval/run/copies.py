"""The env copies the episode engine drives, and where they live (``--vector``).

The engine (:mod:`agentunit_gym.eval.run.engine`) talks to a copy through
:class:`EpisodeCopy` only: assign the next episode, reset, step, end the episode from
outside, warm up, close. A copy is one of:

- a :class:`~agentunit_gym.eval.run.schedule.ScheduleEpisodes` over the env, in this process,
  called on one of the engine's env threads (the default, and ``--vector threads``);
- a :class:`VectorCopy`: the same wrapper inside a one-env gymnasium vector env, through
  gymnasium's public vector API: ``SyncVectorEnv`` in this process (``--vector sync``) or
  ``AsyncVectorEnv`` in a process of its own (``--vector async``).

Each copy steps on its own, as soon as its own agent replies: ``--vector`` chooses where the
copies live, not a per-turn barrier (there is none; docs/eval.md, "Asynchronous episodes, and
where the env copies live").
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.plan.config import VectorMode
from agentunit_gym.eval.run.schedule import Abort, Assignment, ScheduleEpisodes, StepResult

logger = logging.getLogger(__name__)


class EpisodeCopy(Protocol):
    """One env copy as the engine drives it; every call blocks (the engine runs it on an env thread)."""

    def assign(self, assignment: Assignment | None) -> None:
        """The episode the next :meth:`reset` starts (None idles the copy)."""

    def reset(self) -> tuple[str, dict[str, Any]]:
        """Start the assigned episode; ``info["packet"]`` says how it went."""

    def step(self, action: str) -> StepResult:
        """Run the agent's reply; ``info["packet"]`` says how it went."""

    def abort_episode(self, abort: Abort) -> StepResult:
        """End the running episode from outside (an agent failure, a deadline)."""

    def warm_up(self) -> None:
        """Start the copy's backend now rather than in its first episode."""

    def close(self) -> None:
        """Release the copy (idempotent)."""


class VectorCopy:
    """One :class:`~agentunit_gym.eval.run.schedule.ScheduleEpisodes` copy inside a one-env gymnasium
    vector env (autoreset disabled): the episode engine drives it as any copy, through the
    vector env's public API (``set_attr`` for the assignment and an abort, ``reset``,
    ``step``); the Packet comes back in the batched info.

    With an ``AsyncVectorEnv`` every reset and step has the deadline ``call_timeout_s``
    (:class:`~agentunit_gym.errors.BackendTimeoutError` past it) and a stuck copy's process
    is terminated on :meth:`close`.

    Example (:func:`copy_maker` makes one for ``--vector sync``):
        >>> import gymnasium as gym, agentunit_gym
        >>> make = copy_maker("sync", lambda: gym.make("AgentUnit/DB-v0", backend="sqlite"), "AgentUnit/DB-v0", 60.0)
        >>> copy = make()
        >>> type(copy).__name__, type(copy.vec).__name__
        ('VectorCopy', 'SyncVectorEnv')
        >>> copy.assign(Assignment(task_id="db-weather-03", seed=1, key="k"))
        >>> obs, info = copy.reset()
        >>> info["packet"].kind
        'reset'
        >>> *_, info = copy.step('Action: Answer\\nFinal Answer: ["-3.2"]')
        >>> info["packet"].trace.score.success
        True
        >>> copy.close()
    """

    def __init__(self, vec: SyncVectorEnv | AsyncVectorEnv, call_timeout_s: float) -> None:
        self.vec = vec
        self.call_timeout_s = call_timeout_s
        self._busy = False  # a call is under way (in another thread when the engine gave up on it)
        self._closed = False

    def assign(self, assignment: Assignment | None) -> None:
        self.vec.set_attr("assignment", [assignment])

    def reset(self) -> tuple[str, dict[str, Any]]:
        if isinstance(self.vec, AsyncVectorEnv):
            self._busy = True
            self.vec.reset_async()
            obs, infos = self._wait(self.vec.reset_wait)
        else:
            obs, infos = self.vec.reset()
        return str(obs[0]), {"packet": infos["packet"][0]}

    def step(self, action: str) -> StepResult:
        if isinstance(self.vec, AsyncVectorEnv):
            self._busy = True
            self.vec.step_async((action,))
            obs, rewards, terminated, truncated, infos = self._wait(self.vec.step_wait)
        else:
            obs, rewards, terminated, truncated, infos = self.vec.step((action,))
        return str(obs[0]), float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {"packet": infos["packet"][0]}

    def abort_episode(self, abort: Abort) -> StepResult:
        self.vec.set_attr("pending_abort", [abort])
        return self.step("")

    def warm_up(self) -> None:
        if isinstance(self.vec, SyncVectorEnv):
            self.vec.envs[0].get_wrapper_attr("warm_up")()
        # An AsyncVectorEnv's copy warmed up in its own process as it was made (copy_maker):
        # an error in a call there would end that process.

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if isinstance(self.vec, AsyncVectorEnv):
            # A process still in a call (stuck: the engine gave up on it, with a BackendTimeoutError
            # that says so) would never answer a close: terminate it, without gymnasium's warning.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self.vec.close(terminate=self._busy)
        else:
            self.vec.close()

    def _wait(self, wait: Callable[..., Any]) -> Any:
        try:
            result = wait(timeout=self.call_timeout_s)
        except multiprocessing.TimeoutError as exc:
            raise BackendTimeoutError(
                f"an env call did not return within {self.call_timeout_s:g} s: its backend looks stuck. Check the "
                "daemon or server, then rerun with --resume.") from exc
        self._busy = False
        return result


def hosted_copy(make_env: Callable[[], gym.Env[str, str]], env_id: str, *, warm: bool) -> ScheduleEpisodes:
    """``make_env``'s env under :class:`ScheduleEpisodes`, its backend started when ``warm``
    (a failure is left for the first reset to meet, on the usual retry path)."""
    copy = ScheduleEpisodes(make_env(), env_id)
    if warm:
        try:
            copy.warm_up()
        except Exception as exc:  # noqa: BLE001 - the first reset raises it again, on the usual path
            logger.debug("warming up an env copy failed (its first reset will retry): %s", exc)
    return copy


def copy_maker(vector: VectorMode | None, make_env: Callable[[], gym.Env[str, str]], env_id: str,
               call_timeout_s: float) -> Callable[[], EpisodeCopy]:
    """A maker of env copies over ``make_env`` hosted as ``vector`` says (see the module docstring)."""
    if vector == "sync":
        return lambda: VectorCopy(SyncVectorEnv([lambda: hosted_copy(make_env, env_id, warm=False)],
                                                autoreset_mode=AutoresetMode.DISABLED), call_timeout_s)
    if vector == "async":
        here = os.getpid()

        def in_its_process() -> gym.Env[str, str]:
            # AsyncVectorEnv also calls this in this process, for an env it reads the spaces
            # of and closes at once: only the copy in its own process starts its backend.
            return hosted_copy(make_env, env_id, warm=os.getpid() != here)

        # Text spaces cannot live in shared memory; observations travel through the pipe.
        return lambda: VectorCopy(AsyncVectorEnv([in_its_process], shared_memory=False,
                                                 autoreset_mode=AutoresetMode.DISABLED), call_timeout_s)
    return lambda: hosted_copy(make_env, env_id, warm=False)


def head_copy(vector: VectorMode | None, probe: gym.Env[str, str], env_id: str,
              call_timeout_s: float) -> EpisodeCopy | None:
    """``probe`` (the env that listed the tasks) as the first copy, hosted as ``vector`` says;
    None for ``async``, whose copies are made in their own processes (``probe`` is then closed).
    ``probe`` is closed on an error."""
    try:
        if vector == "async":
            probe.close()
            return None
        head = ScheduleEpisodes(probe, env_id)
        if vector == "sync":
            return VectorCopy(SyncVectorEnv([lambda: head], autoreset_mode=AutoresetMode.DISABLED), call_timeout_s)
        return head
    except BaseException:
        probe.close()
        raise


__all__ = ["EpisodeCopy", "VectorCopy", "copy_maker", "head_copy", "hosted_copy"]
