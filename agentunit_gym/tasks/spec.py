"""The base of every task spec: frozen pydantic models shared by all domains.

A domain (OS, DB, ...) subclasses :class:`TaskSpec` with its own fields. Every task carries
a reference solution, the calls an ideal agent makes, which the oracle agent replays.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NEEDS_NETWORK = "needs network (not run; pass --network)"
"""The reason a task that needs the network is left out of a run without it."""

Split = Literal["train", "test", "dev"]
"""A task's split: ``train`` and ``test`` (the bundled suites and generated sets, see
:mod:`agentunit_gym.tasks.splits`), ``dev`` and ``test`` (AgentBench's data, as AgentBench names them)."""



@dataclass(frozen=True)
class AnswerKey:
    """A task's gold answer as text, for a reward function outside the env (an exported row's
    ``reward_model.ground_truth``, docs/training.md, "Exporting trajectories")."""

    text: str
    """The gold answer: a JSON list of strings (``'["-3.2"]'``)."""
    in_reply: bool
    """Whether the agent's committing reply states the answer itself (a DB ``Final Answer:``), so
    a function can score the reply's text against :attr:`text`; False when the reply only names
    something the env resolves (a KG variable: its entities come from the graph, and the env's
    ``score.components.answer`` holds them)."""


class ReferenceStep(BaseModel):
    """One call of a reference solution.

    In task files it is usually written as a one-key mapping, ``{bash: "ls /"}`` or
    ``{answer: "3"}``: the key is the tool, a plain value fills the tool's primary argument,
    a mapping gives every argument.
    """

    model_config = ConfigDict(frozen=True)

    tool: str
    """Tool name, as in the env's tool table."""
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """All arguments, or a plain value for the tool's primary argument."""
    from_output: bool = False
    """Fill the tool's primary argument during the episode with the output the previous step
    showed (AgentBench's check items answer with what their example script printed); the
    step then gives no arguments. See :mod:`agentunit_gym.core.reference`."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and "tool" not in data and len(data) == 1:
            ((tool, arguments),) = data.items()
            if arguments is None:
                arguments = {}
            elif not isinstance(arguments, (dict, str)):
                arguments = str(arguments)
            return {"tool": tool, "arguments": arguments}
        return data

    @model_validator(mode="after")
    def _output_fills_the_arguments(self) -> ReferenceStep:
        if self.from_output and self.arguments:
            raise ValueError("a from_output step takes its argument from the previous output; give no arguments")
        return self


class TaskSpec(BaseModel):
    """Fields every task has, whatever its domain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    """Stable task id, unique within a suite."""
    instruction: str = Field(min_length=1)
    """What the agent is asked to do."""
    category: str = "general"
    """Main category, used by ``--category`` filters and per-category metrics."""
    labels: tuple[str, ...] = ()
    """Free tags."""
    reference_solution: tuple[ReferenceStep, ...] = ()
    """The calls an ideal agent makes; the last one commits (answer / finish / submit)."""
    optimal_steps: int | None = Field(default=None, ge=1)
    """K_opt for step efficiency; defaults to the length of the reference solution."""
    max_steps: int | None = Field(default=None, ge=1)
    """Turn limit for this task; defaults to the domain's."""
    backends: tuple[str, ...] | None = None
    """Backends the task runs on; None means all of the domain's."""
    backend_note: str | None = None
    """Why the task is limited to some backends, when it is."""
    needs_network: bool = False
    """The task reaches the network (its setup installs packages, its solution downloads
    something). It runs only in an env made with ``network=True`` (``eval --network``);
    a run without the network leaves it out, as a backend that cannot run a task does."""
    network_note: str | None = None
    """What needs the network (the AgentBench loader names the commands it found)."""
    template: str | None = Field(default=None, min_length=1)
    """The template (family) the task is an instance of, e.g. ``gen-db/count-where``; None for
    a hand-written task, which is its own family. Every task of a family is in one split."""
    split: Split | None = None
    """``train`` or ``test`` (bundled suites: decided per family by
    :func:`agentunit_gym.tasks.splits.split_of_family`), ``dev`` or ``test`` (AgentBench's
    data); None for a task file that does not say."""
    source: str | None = None
    """Where the task came from (a bundled file, an AgentBench file and index)."""

    @property
    def k_opt(self) -> int:
        """The optimal step count (explicit, else the reference solution's length, else 1)."""
        return self.optimal_steps or max(1, len(self.reference_solution))

    def supports(self, backend: str) -> bool:
        return self.backends is None or backend in self.backends

    def answer_key(self) -> AnswerKey | None:
        """The gold answer as text, when the task has one a function could score outside the env;
        None here (a task graded on the state it leaves: a check script, a table hash, a purchase)."""
        return None

    def list_notes(self) -> tuple[str, ...]:
        """Short notes ``tasks list`` shows beside the task's backends (``needs network``); a
        domain's task model adds its own (the OS task: ``switches users``)."""
        return ("needs network",) if self.needs_network else ()

    def not_runnable(self, backend: str, *, network: bool) -> str | None:
        """Why the task cannot run on ``backend`` with (or without) the network; None when it
        can. (An env may refuse a task for a reason of its domain besides:
        :meth:`~agentunit_gym.core.env.AgentEnv.not_runnable`.)

        Example: ``"needs network (not run; pass --network)"``.
        """
        if not self.supports(backend):
            note = self.backend_note or f"runs only on {', '.join(self.backends or ())}"
            return f"not run on {backend}: {note}"
        if self.needs_network and not network:
            return NEEDS_NETWORK + (f": {self.network_note}" if self.network_note else "")
        return None


def left_out_note(suite: Sequence[TaskSpec], backend: str, *, needs_docker: Collection[str] = (),
                  network: bool = True, refused: Sequence[tuple[TaskSpec, Refusal]] = ()) -> str | None:
    """A one-line warning when ``backend`` cannot run the whole of ``suite``, else None.

    ``needs_docker`` names the backends that run on a Docker daemon (from the domain
    descriptions): when the left-out tasks need one of them, the hint says to start Docker.
    ``network`` is whether the env has the network; without it, tasks that need it are
    left out too, and the note counts them. ``refused`` are the tasks the env refuses for a
    reason of its domain (:meth:`~agentunit_gym.core.env.AgentEnv.refusals`), counted per
    kind of refusal.

    Example: ``"8 docker-only tasks left out on backend local: start Docker (or pass --backend
    docker) for the full suite"``. Tasks list the backends they run on; those that do not list
    ``backend`` are left out of a run on it, which changes what the run's numbers mean.
    """
    notes = []
    left = [task for task in suite if not task.supports(backend)]
    if left:
        needed = sorted({name for task in left for name in (task.backends or ())})
        label = "/".join(needed) if needed else "other-backend"
        hint = (f"start Docker (or pass --backend {needed[0]})" if len(needed) == 1 and needed[0] in needs_docker
                else f"use --backend {needed[0]}" if needed else "use another backend")
        plural = "s" if len(left) != 1 else ""
        notes.append(f"{len(left)} {label}-only task{plural} left out on backend {backend}: {hint} for the full suite")
    kinds: dict[tuple[str, str], int] = {}
    for _, refusal in refused:
        kinds[(refusal.label, refusal.hint)] = kinds.get((refusal.label, refusal.hint), 0) + 1
    for (label, hint), count in kinds.items():
        plural = "s" if count != 1 else ""
        notes.append(f"{count} task{plural} left out on backend {backend} ({label}): {hint}")
    refused_ids = {task.id for task, _ in refused}
    offline = [task for task in suite if task.supports(backend) and task.needs_network and not network
               and task.id not in refused_ids]
    if offline:
        plural = "s" if len(offline) != 1 else ""
        notes.append(f"{len(offline)} task{plural} that need{'' if plural else 's'} the network left out: "
                     f"pass --network to run {'them' if plural else 'it'}")
    return "; ".join(notes) or None


@dataclass(frozen=True)
class Refusal:
    """Why an env cannot run a task, for a reason of its domain (beyond its backend and the
    network): the OS env's sandbox that maps one uid refuses the tasks that switch users."""

    reason: str
    """Per task, as a left-out list shows it: ``"not run on local: acts as another user (su); ..."``."""
    label: str
    """What the refused tasks have in common, for the one-line note: ``"switches users"``."""
    hint: str
    """What to do instead: ``"it maps one uid here (run as root, or use --backend docker)"``."""
