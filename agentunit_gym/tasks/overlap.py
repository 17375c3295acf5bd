"""What two task sets share: the same task under any name, found by four keys.

A trainer trains on one set and reports on another, so the two must not hold the same
task. "The same" is read four ways, each a *key* of a task:

- ``id``: the task id (a generated task's id names its content, see :func:`content_id`);
- ``instruction``: the instruction with whitespace and case normalised and the values a
  generator draws masked (numbers, quoted values, the domain's drawn names), so an
  instance of a family matches the family's other instances but not another family;
- ``reference``: the reference solution normalised (SQL formatted, shell commands with
  whitespace collapsed, tool calls as canonical JSON);
- ``answer``: the gold answer together with its target (the table and columns, the
  entities and relations, the product), so a reworded question with the same answer
  about the same thing is found too.

How a task's keys are read is domain knowledge: each domain declares it as
:attr:`~agentunit_gym.core.domain.Domain.task_keys` (its own normalisers live in its
folder); :func:`default_task_keys` is what a domain that declares nothing gets.

Example:

    >>> from agentunit_gym.tasks.spec import TaskSpec
    >>> a = [TaskSpec(id="a1", instruction="Count  the FILES in /root/x_12."),
    ...      TaskSpec(id="a2", instruction="Say hello.")]
    >>> b = [TaskSpec(id="b1", instruction="count the files in /root/x_7.")]
    >>> found = find_overlap(a, b, default_task_keys)
    >>> found.counts(), found.any
    ({'id': 0, 'instruction': 1, 'reference': 0, 'answer': 0}, True)
    >>> found.shared["instruction"][0].a_ids, found.shared["instruction"][0].b_ids
    (('a1',), ('b1',))
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentunit_gym.tasks.spec import TaskSpec

KEYS: tuple[str, ...] = ("id", "instruction", "reference", "answer")
"""The keys two task sets are compared by, in report order."""

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class TaskKeys:
    """A task's keys besides its id; None for a key the task has not (a mutation's answer)."""

    instruction: str | None
    reference: str | None
    answer: str | None


TaskKeysOf = Callable[[TaskSpec], TaskKeys]
"""How a domain reads a task's keys."""


def collapse(text: str) -> str:
    """``text`` lowercased, its whitespace runs made one space, stripped."""
    return _SPACE.sub(" ", text).strip().lower()


def mask_values(text: str, names: Iterable[str] = ()) -> str:
    """``text`` with ``names`` (longest first), quoted values and numbers replaced by placeholders,
    then :func:`collapse`-d: the shape of a templated instruction.

    Example: ``mask_values('How many rows have site "Waseca" above 3.5?')`` is
    ``'how many rows have site <v> above #?'``.
    """
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        text = re.sub(re.escape(name), "<e>", text, flags=re.IGNORECASE)
    text = _QUOTED.sub("<v>", text)
    return collapse(_NUMBER.sub("#", text))


def canonical_json(value: Any) -> str:
    """``value`` as compact JSON with sorted keys: equal data gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def reference_calls(task: TaskSpec, *, normalise: Callable[[str], str] = collapse) -> str:
    """The task's reference solution as canonical JSON, each string argument through ``normalise``."""
    steps = []
    for step in task.reference_solution:
        arguments = step.arguments
        if isinstance(arguments, str):
            arguments = normalise(arguments)
        else:
            arguments = {k: normalise(v) if isinstance(v, str) else v for k, v in arguments.items()}
        steps.append([step.tool, arguments, step.from_output])
    return canonical_json(steps)


def default_task_keys(task: TaskSpec) -> TaskKeys:
    """Keys any task has: the masked instruction and the reference calls; no answer key."""
    reference = reference_calls(task) if task.reference_solution else None
    return TaskKeys(mask_values(task.instruction), reference, None)


def content_id(domain: str, family: str, drawn: Any, *, digits: int = 12) -> str:
    """A generated task's id, named by its content: ``gen-<domain>-<family>-<hash>``.

    ``family`` is the template (its part after the last ``/``, lowercased, non-alphanumerics
    made ``-``); the hash is the first ``digits`` hex digits of the SHA-256 of the canonical
    JSON of ``(family, drawn)``, where ``drawn`` is what the generator drew for this task.
    The same task gets the same id in every seed and every set.

    Example:

        >>> content_id("db", "gen-db/count-above", "SELECT COUNT(*) FROM t WHERE x > 3")
        'gen-db-count-above-f12cdf14fd2f'
    """
    tail = _SLUG.sub("-", family.rsplit("/", 1)[-1].lower()).strip("-") or "task"
    digest = hashlib.sha256(canonical_json([family, drawn]).encode("utf-8")).hexdigest()
    return f"gen-{domain}-{tail}-{digest[:digits]}"


@dataclass(frozen=True)
class SharedKey:
    """One key value both sets hold, with the tasks of each side that hold it."""

    value: str
    a_ids: tuple[str, ...]
    b_ids: tuple[str, ...]


@dataclass(frozen=True)
class Overlap:
    """What two task sets share, per key (:data:`KEYS`)."""

    a_count: int
    b_count: int
    shared: Mapping[str, tuple[SharedKey, ...]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Per key, how many tasks of the first set share it with the second."""
        return {k: sum(len(s.a_ids) for s in self.shared.get(k, ())) for k in KEYS}

    @property
    def any(self) -> bool:
        """Whether the sets share anything by any key."""
        return any(self.shared.get(k) for k in KEYS)

    def shared_ids(self) -> set[str]:
        """The ids of the first set's tasks that share some key with the second."""
        return {i for k in KEYS for s in self.shared.get(k, ()) for i in s.a_ids}

    def to_json(self, examples: int = 5) -> dict[str, Any]:
        """Counts and up to ``examples`` shared values per key, as plain data."""
        return {
            "a_tasks": self.a_count,
            "b_tasks": self.b_count,
            "shared": self.counts(),
            "examples": {k: [{"value": s.value, "a": list(s.a_ids), "b": list(s.b_ids)}
                             for s in self.shared.get(k, ())[:examples]] for k in KEYS},
        }


def key_values(tasks: Iterable[TaskSpec], keys_of: TaskKeysOf) -> dict[str, dict[str, list[str]]]:
    """Per key, ``value -> ids of the tasks holding it`` (a task without a key is left out of it)."""
    index: dict[str, dict[str, list[str]]] = {k: {} for k in KEYS}
    for task in tasks:
        keys = keys_of(task)
        for name, value in (("id", task.id), ("instruction", keys.instruction), ("reference", keys.reference),
                            ("answer", keys.answer)):
            if value is not None:
                index[name].setdefault(value, []).append(task.id)
    return index


def find_overlap(a: Sequence[TaskSpec], b: Sequence[TaskSpec], keys_of: TaskKeysOf) -> Overlap:
    """What ``a`` and ``b`` share by each key.

    Args:
        a, b: the two task sets.
        keys_of: how the domain reads a task's keys (``Domain.task_keys``).

    Returns:
        The shared values per key, each with the ids of both sides, in ``a``'s order.
    """
    left = key_values(a, keys_of)
    right = key_values(b, keys_of)
    shared = {k: tuple(SharedKey(v, tuple(ids), tuple(right[k][v])) for v, ids in left[k].items() if v in right[k])
              for k in KEYS}
    return Overlap(len(a), len(b), shared)


__all__ = ["KEYS", "Overlap", "SharedKey", "TaskKeys", "TaskKeysOf", "canonical_json", "collapse", "content_id",
           "default_task_keys", "find_overlap", "key_values", "mask_values", "reference_calls"]
