"""Pin an env to one task across autoresets (GRPO groups), and catch resets that lost their options.

gymnasium's vector envs reset a copy whose episode ended by calling ``reset()`` with neither
a seed nor options (the autoreset, in every autoreset mode). :class:`TaskPin` gives that bare
reset the task of the last ``reset(options={..., "sticky": True})``, so every copy of a group
plays the group's task on every episode until an explicit reset releases it. An explicit reset
is one with a seed or options (``options={}`` counts); a bare ``reset()`` looks exactly like an
autoreset to the env, so it keeps the pin.

It also notices gymnasium 1.4's bug with ``AsyncVectorEnv(shared_memory=False)`` and next-step
autoreset: a copy whose last step ended its episode is reset again, bare, on the first step
after ``envs.reset(options=...)``, so it plays a task nobody asked for. The env sees: an
episode ended by a step, a reset with options, then a bare reset before any step. No
gymnasium vector env sends that sequence otherwise (an autoreset only follows a step that
ended an episode), so it raises :class:`~agentunit_gym.errors.LostResetOptionsError` naming
the workaround. A caller who wants a drawn task right after a reset with options says so with
a seed or ``options={}``.

Example:
    >>> import gymnasium as gym, agentunit_gym
    >>> env = gym.make("AgentUnit/DB-v0", backend="sqlite")
    >>> _, info = env.reset(options={"task_id": "db-weather-03", "sticky": True})
    >>> *_, terminated, _, _ = env.step('Action: Answer\\nFinal Answer: ["-3.2"]')
    >>> env.reset()[1]["task_id"]           # what an autoreset sends: the pinned task again
    'db-weather-03'
    >>> fresh = gym.make("AgentUnit/DB-v0", backend="sqlite")
    >>> env.reset(seed=0)[1]["task_id"] == fresh.reset(seed=0)[1]["task_id"]   # explicit: released
    True
    >>> env.close(); fresh.close()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentunit_gym.errors import ConfigError, LostResetOptionsError
from agentunit_gym.tasks.spec import TaskSpec

TaskT = TypeVar("TaskT", bound=TaskSpec)

STICKY_OPTION = "sticky"
"""The reset option that pins the task the reset starts (``True``) or releases a pin (``False``)."""


@dataclass(frozen=True)
class ResetRequest:
    """What one ``reset()`` asks of the env, once the pin has read it."""

    options: dict[str, Any]
    """The options to pick the task from (``sticky`` taken out; the pinned task on an autoreset)."""
    sticky: bool
    """Pin the task this reset starts."""
    explicit: bool
    """The caller's reset (a seed or options), not the bare reset an autoreset sends."""
    droppable: tuple[str, ...]
    """The option keys a lost reset would drop: the reset's keys when it follows an ended
    episode (gymnasium may then owe the copy an autoreset), else none."""


@dataclass
class TaskPin(Generic[TaskT]):
    """The env's pinned task, and whether the next bare reset would have lost options.

    The env calls :meth:`request` at the start of ``reset`` (before it releases the running
    episode, so a refused reset leaves it as it was), :meth:`started` once the task is picked,
    and :meth:`stepped` on every step.
    """

    task: TaskT | None = None
    """The pinned task, None when the env is not pinned."""
    options_pending: tuple[str, ...] = ()
    """The option keys of the last reset while no step has come since, when that reset followed
    an ended episode: the moment gymnasium 1.4 may send a bare reset that drops them."""
    pending_task_id: str = ""
    """The task that reset started (for the error's message)."""

    def request(self, seed: int | None, options: dict[str, Any] | None, *,
                episode_ended: bool) -> ResetRequest:
        """Read one ``reset(seed, options)``.

        Args:
            seed: the reset's seed.
            options: the reset's options (unknown keys already refused by the env).
            episode_ended: the env's previous episode was ended (by a step or a wrapper).

        Returns:
            The options to pick the task from, and what the reset asks of the pin.

        Raises:
            LostResetOptionsError: a bare reset right after a reset with options that followed
                an ended episode, before any step: gymnasium's lost autoreset (see the module).
            ConfigError: ``sticky`` is not a bool.
        """
        explicit = seed is not None or options is not None
        if not explicit and self.options_pending:
            raise LostResetOptionsError.dropped(self.options_pending, self.pending_task_id)
        given = dict(options or {})
        sticky = given.pop(STICKY_OPTION, False)
        if not isinstance(sticky, bool):
            raise ConfigError(f"reset option 'sticky' must be True or False, got {sticky!r}.")
        if not explicit and self.task is not None:
            given = {"task": self.task}
        # What a lost autoreset would drop: the options' keys, and the seed (a seeded reset the
        # bug repeats without its seed plays whatever the RNG draws next).
        lost = sorted(str(k) for k in options or {}) + (["seed"] if seed is not None else [])
        droppable = tuple(lost) if episode_ended else ()
        return ResetRequest(options=given, sticky=sticky, explicit=explicit, droppable=droppable)

    def started(self, task: TaskT, request: ResetRequest) -> None:
        """Record the task the reset started: pinned when it asked, released by an explicit reset."""
        if request.explicit:
            self.task = task if request.sticky else None
        self.options_pending = request.droppable
        self.pending_task_id = task.id if request.droppable else ""

    def stepped(self) -> None:
        """A step came: a bare reset from now on is an autoreset."""
        self.options_pending = ()
        self.pending_task_id = ""

    def travelling(self) -> TaskPin[TaskT]:
        """The pin a pickled copy carries: the task stays pinned (a setting, as the RNG state);
        the copy has no episode, so nothing is pending."""
        return dataclasses.replace(self, options_pending=(), pending_task_id="")
