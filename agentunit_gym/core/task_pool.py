"""An env's tasks: its suite loaded once, restricted to a split, and the task each reset plays.

:class:`TaskPool` reads the suite an env is made with (the domain's bundled suite, task files
or folders in any format the domain reads, or task specs), keeps the tasks of the asked-for
split, and picks the task of each ``reset``: by id, as given, or drawn with the env's RNG from
the tasks its backend runs; the sticky pin (:mod:`~agentunit_gym.core.task_pin`) is part of it.
Whether a task runs is the env's to say (its backend, its domain's reasons, its network): the
pool takes that as a :class:`Runner` on each call, so it holds no reference to the env.

Example:

    >>> from agentunit_gym.core.registry import get_domain
    >>> pool = TaskPool(get_domain("db"), None, split="test")
    >>> {t.split for t in pool.suite}
    {'test'}
    >>> runner = Runner("sqlite", network=False, refusal=lambda task: None)
    >>> import numpy as np
    >>> a = pool.pick({}, np.random.default_rng(0), runner)
    >>> a == pool.pick({}, np.random.default_rng(0), runner)   # the same draw for the same RNG
    True
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import numpy as np

from agentunit_gym.core.domain import Domain
from agentunit_gym.core.info import RESET_OPTION_KEYS
from agentunit_gym.core.task_pin import TaskPin
from agentunit_gym.errors import ConfigError, ResetOptionError, TaskFileError, TaskNotFoundError
from agentunit_gym.tasks.loader import load_tasks
from agentunit_gym.tasks.spec import Refusal, TaskSpec
from agentunit_gym.tasks.splits import filter_split

TaskT = TypeVar("TaskT", bound=TaskSpec)

TaskSource = str | Path | Sequence[str | Path] | Sequence[TaskSpec] | None
"""What an env's ``tasks=`` takes: None (the bundled suite), a file or folder, a list of them,
or task specs."""

logger = logging.getLogger("agentunit_gym")


@dataclass(frozen=True)
class Runner(Generic[TaskT]):
    """What decides whether an env runs a task: its backend, its network, its domain's reasons."""

    backend: str
    """The backend the env runs on (``env.backend_name``)."""
    network: bool
    """Whether that backend reaches the network."""
    refusal: Callable[[TaskT], Refusal | None]
    """The env's own reason to refuse a task its backend supports (its ``_refusal`` hook)."""

    def why_not(self, task: TaskT) -> str | None:
        """Why the env cannot run ``task``, None when it can: a backend the task does not run on,
        then the domain's reason, then the network it lacks."""
        if task.supports(self.backend):
            refused = self.refusal(task)
            if refused is not None:
                return refused.reason
        return task.not_runnable(self.backend, network=self.network)

    def admit(self, task: TaskT) -> TaskT:
        """``task``, when the env can run it.

        Raises:
            ConfigError: why it cannot, with what to do instead.
        """
        if not task.supports(self.backend):
            note = f" ({task.backend_note})" if task.backend_note else ""
            runs_on = ", ".join(task.backends or ())
            raise ConfigError(f"task {task.id!r} runs on {runs_on}, not on {self.backend!r}{note}.")
        refused = self.refusal(task)
        if refused is not None:
            raise ConfigError(f"task {task.id!r} cannot run in this env ({refused.reason}): {refused.hint}.")
        if task.needs_network and not self.network:
            what = f" ({task.network_note})" if task.network_note else ""
            raise ConfigError(f"task {task.id!r} needs the network{what}, and this env has none: make it with "
                              "network=True (agentunit-gym eval --network) where the domain allows it.")
        return task


class TaskPool(Generic[TaskT]):
    """The tasks of one env (see the module).

    Args:
        domain: the domain's description: its task model, bundled suite and task formats.
        tasks: the suite: None for the bundled one, task files or folders (native, or a format
            the domain detects, e.g. an AgentBench checkout), or task specs.
        split: ``train``, ``test`` (``dev`` for AgentBench's data): only the tasks of that split; None for all.

    Raises:
        ConfigError: a split no task of the suite is in, or a list mixing specs and files.
        TaskFileError: a task file that does not validate.
    """

    def __init__(self, domain: Domain, tasks: TaskSource, split: str | None) -> None:
        # The model, not the description: the pool travels in a pickle, a description need not.
        self.task_model: type[TaskSpec] = domain.task_model
        self.split = split
        self.suite: tuple[TaskT, ...] = tuple(filter_split(self._resolve(domain, tasks), split,
                                                           where=f"this {domain.name} env's suite"))
        self.pin: TaskPin[TaskT] = TaskPin()

    def coerce(self, task: TaskSpec | dict[str, Any]) -> TaskT:
        """``task`` as an instance of the domain's task model (a dict or another model is validated).

        Raises:
            pydantic.ValidationError: it does not validate as the domain's task.
        """
        model = self.task_model
        if not isinstance(task, model):
            task = model.model_validate(task.model_dump() if isinstance(task, TaskSpec) else task)
        # The domain's task model is a TaskT; the description cannot say so in its type.
        return cast(TaskT, task)

    def runnable(self, runner: Runner[TaskT]) -> list[TaskT]:
        """The tasks of the suite ``runner`` can run."""
        return [t for t in self.suite if runner.why_not(t) is None]

    def refusals(self, runner: Runner[TaskT]) -> list[tuple[TaskT, Refusal]]:
        """The tasks ``runner``'s backend supports that it refuses for a reason of its domain."""
        found = [(t, runner.refusal(t)) for t in self.suite if t.supports(runner.backend)]
        return [(t, r) for t, r in found if r is not None]

    def pick(self, options: dict[str, Any], rng: np.random.Generator, runner: Runner[TaskT]) -> TaskT:
        """The task a reset with ``options`` plays: ``options["task"]`` (a spec or a dict), the
        suite's task ``options["task_id"]``, else one drawn with ``rng`` from :meth:`runnable`.

        Raises:
            TaskNotFoundError: an unknown task id.
            ConfigError: a task ``runner`` cannot run, or no task of the suite it can.
        """
        if "task" in options:
            task = self.coerce(options["task"])
        elif "task_id" in options:
            wanted = options["task_id"]
            matches = [t for t in self.suite if t.id == wanted]
            if not matches:
                raise TaskNotFoundError(f"no task {wanted!r} in this env's suite of {len(self.suite)} tasks.")
            task = matches[0]
        else:
            pool = self.runnable(runner)
            if not pool:
                raise ConfigError(f"no task of this suite runs on the {runner.backend!r} backend; "
                                  "pick another backend.")
            task = pool[int(rng.integers(len(pool)))]
        return runner.admit(task)

    def choose(self, seed: int | None, options: dict[str, Any] | None, *, episode_ended: bool,
               rng: np.random.Generator, runner: Runner[TaskT]) -> TaskT:
        """The task of ``reset(seed=seed, options=options)``: the pin reads the reset
        (:meth:`TaskPin.request`: an autoreset plays the pinned task), :meth:`pick` picks it, and
        the pin keeps it when the reset asks (``"sticky": True``) or lets go on an explicit reset.

        Args:
            seed, options: the reset's.
            episode_ended: the env's previous episode has ended (by a step or a wrapper).
            rng: the env's RNG, already seeded by the reset.
            runner: what decides whether the env runs a task.

        Raises:
            ResetOptionError: an option key other than those of :data:`~agentunit_gym.core.info.RESET_OPTION_KEYS`.
            LostResetOptionsError: gymnasium 1.4's lost autoreset (:mod:`~agentunit_gym.core.task_pin`).
            TaskNotFoundError, ConfigError: as :meth:`pick`.
        """
        unknown = sorted(str(k) for k in (options or {}) if k not in RESET_OPTION_KEYS)
        if unknown:
            raise ResetOptionError.unknown_keys(unknown, RESET_OPTION_KEYS)
        request = self.pin.request(seed, options, episode_ended=episode_ended)
        task = self.pick(request.options, rng, runner)
        self.pin.started(task, request)
        return task

    def travelling(self) -> TaskPool[TaskT]:
        """The pool a pickled copy of the env carries: the same suite and pin, nothing pending."""
        travelled = copy.copy(self)
        travelled.pin = self.pin.travelling()
        return travelled

    def _resolve(self, domain: Domain, tasks: TaskSource) -> list[TaskT]:
        specs: Sequence[TaskSpec | dict[str, Any]]
        if tasks is None:
            specs = domain.bundled_tasks()  # each with its split
        elif isinstance(tasks, (str, Path)):
            specs = _load_path(domain, Path(tasks))
        else:
            items = list(tasks)
            if all(isinstance(t, TaskSpec) for t in items):
                specs = [t for t in items if isinstance(t, TaskSpec)]
            else:
                paths = [t for t in items if isinstance(t, (str, Path))]
                if len(paths) != len(items):
                    raise ConfigError("tasks mixes task specs and task files; pass a list of one kind.")
                specs = load_tasks(paths, domain.task_model)
        return [self.coerce(t) for t in specs]


def _load_path(domain: Domain, path: Path) -> Sequence[TaskSpec]:
    """Native task files, or a foreign format the domain's description detects (AgentBench's).

    Native files are all-or-nothing (the first bad task raises). A foreign file keeps its
    good items: the ones that do not convert are logged as one warning, and only a path
    with no usable task raises.
    """
    if domain.detect_format(path) == "native":
        return load_tasks(path, domain.task_model)
    result = domain.load_tasks(path)
    if result.problems:
        logger.warning("%d item(s) of %s did not convert and are left out; the first: %s",
                       len(result.problems), path, result.problems[0])
    if not result.tasks:
        result.raise_first()
        raise TaskFileError(str(path), "no task in this file or folder.")
    return result.tasks
