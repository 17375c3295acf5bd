"""Train and test splits: one policy, decided per task family, so no family crosses splits.

A *family* is what a task is an instance of: the template a generated (or
template-made) task was filled from, or, for a hand-written task, the task itself. A
family's split is a pure function of its name (:func:`split_of_family`), so it never
depends on which other families exist, on the order of files, or on a seed: a family is
``test`` when the first 8 bytes of ``sha256("agentunit-gym/split:" + family)``, read as
an integer ``h``, satisfy ``h / 2**64 < TEST_SHARE``, and ``train`` otherwise. Every
instance of a family lands in the same split, so a test task is never an instance of a
template a trainer saw.

AgentBench's own data keeps AgentBench's names: its loaders mark ``dev`` and ``test``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, TypeVar, get_args

from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import Split, TaskSpec

T = TypeVar("T", bound=TaskSpec)

TEST_SHARE = 0.25
"""The share of families (not of tasks) that are ``test``, in expectation."""

SPLITS: tuple[str, ...] = get_args(Split)
"""Every split name a task may carry: ``train`` and ``test`` (our suites), ``dev`` (AgentBench's)."""

BundledSplit = Literal["train", "test"]

_SALT = "agentunit-gym/split:"


def split_of_family(family: str) -> BundledSplit:
    """The split of every task of ``family`` (see the module docstring for the rule).

    Example: ``split_of_family("db-iris-01")`` is always the same value, whatever else exists.
    """
    digest = hashlib.sha256((_SALT + family).encode("utf-8")).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < TEST_SHARE else "train"


def family_of(task: TaskSpec) -> str:
    """The task's family: its ``template``, else its id (a hand-written task is its own family)."""
    return task.template or task.id


def assign_splits(tasks: Iterable[T], family: Callable[[TaskSpec], str] = family_of) -> list[T]:
    """``tasks`` with ``split`` filled where missing: ``family(task)`` names the task's family
    (also written to ``template`` when it is not the task's own id), :func:`split_of_family`
    gives its split.

    A task that already names its split keeps it (a loader's ``dev``, a file's own choice).
    """
    out: list[T] = []
    for task in tasks:
        if task.split is not None:
            out.append(task)
            continue
        name = family(task)
        update: dict[str, str] = {"split": split_of_family(name)}
        if task.template is None and name != task.id:
            update["template"] = name
        out.append(task.model_copy(update=update))
    return out


def check_split(split: str) -> str:
    """``split`` when it is a known split name.

    Raises:
        ConfigError: an unknown name (the message lists the known ones).
    """
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}. Bundled suites have "
                          "train and test; AgentBench's data has dev and test.")
    return split


def filter_split(tasks: Sequence[T], split: str | None, *, where: str = "this suite") -> list[T]:
    """The tasks of ``split`` (all of them when ``split`` is None).

    Raises:
        ConfigError: an unknown split name, or no task of ``tasks`` in that split (the message
            counts what each split holds, so a file without ``split`` fields is recognised).
    """
    if split is None:
        return list(tasks)
    check_split(split)
    kept = [t for t in tasks if t.split == split]
    if not kept and tasks:
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t.split or "none"] = counts.get(t.split or "none", 0) + 1
        found = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        raise ConfigError(f"no task of {where} is in split {split!r} (found {found}). Task files name a task's "
                          "split in its 'split' field (docs/tasks.md, \"Splits\"); drop the split option to "
                          "run every task.")
    return kept


__all__ = ["SPLITS", "TEST_SHARE", "assign_splits", "check_split", "family_of", "filter_split", "split_of_family"]
