"""Task sets named on the command line, and what two of them share (``agentunit-gym tasks overlap``).

A task set is named by one of:

- a task file or folder (native, or a format a domain's loader reads);
- ``bundled:ENV`` or ``bundled:ENV:SPLIT``: the env's bundled suite, or one split of it
  (``bundled:DB-v0:test``);
- ``generated:ENV:SPLIT:COUNT[:SEED]``: what ``tasks generate`` would write
  (``generated:DB-v0:train:10000:0``; ``SPLIT`` ``all`` for every family).

The keys two sets are compared by are the domain's (:attr:`Domain.task_keys`), so both sets
must be of one domain.

Example:

    >>> from agentunit_gym.core.task_sets import overlap_of
    >>> found = overlap_of("generated:DB-v0:train:200:0", "bundled:DB-v0:test")
    >>> found.overlap.counts(), found.overlap.any
    ({'id': 0, 'instruction': 0, 'reference': 0, 'answer': 0}, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.core.domain import Domain
from agentunit_gym.core.generation import domain_for_env
from agentunit_gym.errors import ConfigError, TaskFileError
from agentunit_gym.tasks.overlap import Overlap, find_overlap
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import check_split

SPEC_HELP = ("a task file or folder, bundled:ENV[:SPLIT] (a bundled suite, or its train or test split), or "
             "generated:ENV:SPLIT:COUNT[:SEED] (what tasks generate writes; SPLIT train, test or all)")


@dataclass(frozen=True)
class TaskSet:
    """The tasks a spec names, with their domain."""

    spec: str
    domain: Domain
    tasks: tuple[TaskSpec, ...]


@dataclass(frozen=True)
class SetOverlap:
    """What two named task sets share."""

    a: TaskSet
    b: TaskSet
    overlap: Overlap

    def to_json(self, examples: int = 5) -> dict[str, Any]:
        """The sets, the shared counts per key and examples, as plain data."""
        return {"a": self.a.spec, "b": self.b.spec, "domain": self.a.domain.name,
                **self.overlap.to_json(examples)}


def load_task_set(spec: str) -> TaskSet:
    """The tasks ``spec`` names (see the module docstring).

    Raises:
        ConfigError: a malformed ``bundled:`` or ``generated:`` spec, an unknown env or split.
        TaskFileError: a file that cannot be read or does not validate (naming the file, and the
            line of a syntax error or the item of an invalid one), or a path of several domains.
    """
    kind, _, rest = spec.partition(":")
    if kind == "bundled" and rest:
        env, _, split = rest.partition(":")
        domain = domain_for_env(env)
        tasks = domain.bundled_tasks(check_split(split) if split else None)
        return TaskSet(spec, domain, tuple(tasks))
    if kind == "generated" and rest:
        parts = rest.split(":")
        if len(parts) not in (3, 4) or not all(p.isdigit() for p in parts[2:]):
            raise ConfigError(f"{spec!r}: expected generated:ENV:SPLIT:COUNT[:SEED] (an env id, train, test or "
                              "all, a number of tasks, a seed).")
        domain = domain_for_env(parts[0])
        chosen = None if parts[1] == "all" else parts[1]
        seed = int(parts[3]) if len(parts) == 4 else 0
        return TaskSet(spec, domain, tuple(domain.generate_tasks(int(parts[2]), seed=seed, split=chosen)))
    return _load_files(spec)


def _load_files(spec: str) -> TaskSet:
    from agentunit_gym.core.task_sources import load_path

    sources = load_path(Path(spec))
    for source in sources:
        for problem in source.result.problems:
            raise TaskFileError(problem.source, problem.message, task_id=problem.task_id, field=problem.field)
    names = sorted({s.domain.name for s in sources})
    if len(names) != 1:
        raise TaskFileError(spec, f"holds tasks of several domains ({', '.join(names)}); compare one domain at a time.")
    return TaskSet(spec, sources[0].domain, tuple(t for s in sources for t in s.result.tasks))


def overlap_of(a: str, b: str) -> SetOverlap:
    """What the task sets ``a`` and ``b`` share by each overlap key (:mod:`agentunit_gym.tasks.overlap`).

    Raises:
        ConfigError, TaskFileError: as :func:`load_task_set`; two sets of different domains.
    """
    left, right = load_task_set(a), load_task_set(b)
    if left.domain.name != right.domain.name:
        raise ConfigError(f"{a} holds {left.domain.name} tasks and {b} {right.domain.name} tasks: compare sets of "
                          "one domain.")
    return SetOverlap(left, right, find_overlap(left.tasks, right.tasks, left.domain.task_keys))


__all__ = ["SPEC_HELP", "SetOverlap", "TaskSet", "load_task_set", "overlap_of"]
