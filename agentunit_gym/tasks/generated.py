"""Drawing a generated set that holds no test task and none of the excluded ones.

:meth:`agentunit_gym.core.domain.Domain.generate_tasks` calls :func:`draw_checked` with the
domain's generator, its overlap keys and its bundled test split; this module knows no domain.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import KEYS, TaskKeysOf, key_values
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import check_split

EXCLUDE_KEYS: tuple[str, ...] = ("id", "reference", "answer")
"""The keys ``--exclude`` compares: the same task, not the same shape of instruction (every
instance of a family shares that; a generated train set avoids the test splits by all four)."""

Generate = Callable[..., list[TaskSpec]]
"""A generator: ``generate(count, *, seed, split) -> list[TaskSpec]``."""


def blocker(keys_of: TaskKeysOf,
            blocks: Sequence[tuple[Sequence[TaskSpec], Sequence[str]]]) -> Callable[[TaskSpec], bool]:
    """Whether a task shares, for some ``(tasks, keys)`` of ``blocks``, one of ``keys`` with ``tasks``."""
    indexes = [(key_values(tasks, keys_of), keys) for tasks, keys in blocks if tasks]

    def blocked(task: TaskSpec) -> bool:
        if not indexes:
            return False
        own = keys_of(task)
        values = {"id": task.id, "instruction": own.instruction, "reference": own.reference, "answer": own.answer}
        return any(values[k] is not None and values[k] in index[k] for index, keys in indexes for k in keys)

    return blocked


def draw_checked(generate: Generate, count: int, *, seed: int, split: str | None, keys_of: TaskKeysOf,
                 tests: Sequence[TaskSpec] = (), exclude: Sequence[TaskSpec] = (),
                 ceiling: Callable[[str | None], int] | None = None, name: str = "the",
                 bundled_ids: Collection[str] = (), where: str = "",
                 progress: Callable[[int, int | None, str], None] | None = None) -> list[TaskSpec]:
    """The generator's first ``count`` tasks that share no overlap key with ``tests`` and no id,
    reference or answer (:data:`EXCLUDE_KEYS`) with ``exclude``, their ids checked.

    Tasks left out are replaced by the generator's next ones (a longer count extends a shorter one).

    Args:
        generate: the domain's generator.
        keys_of: the domain's overlap keys (:mod:`agentunit_gym.tasks.overlap`).
        tests: tasks of a test split the set must not hold (for a train set: the bundled test split).
        exclude: tasks the set must not hold (``--exclude``).
        ceiling: ``ceiling(split)``, how many distinct tasks the generator makes; None when unknown.
        name: the domain's name: ids start ``gen-<name>-``.
        bundled_ids: the bundled suite's ids, which no generated task may take.
        where: the generator's ``"module:function"``, for messages.
        progress: ``progress(done, total, note)``, told when drawing starts and as drawn tasks
            are checked against ``tests`` and ``exclude`` (the CLI's progress bar or log lines).

    Raises:
        ConfigError: a count below 1, an unknown split or ``dev``, fewer tasks available than
            ``count`` (the message gives how many are), or a generator that broke its contract
            (an id not ``gen-<name>-...``, a repeated or a bundled id).
    """
    if count < 1:
        raise ConfigError(f"the number of tasks to generate must be at least 1, got {count}.")
    if split is not None:
        check_split(split)
        if split == "dev":
            raise ConfigError("generated tasks are train or test, not dev (dev is AgentBench's name); "
                              "pass --split train or --split test.")
    blocked = blocker(keys_of, [(tests, KEYS), (exclude, EXCLUDE_KEYS)])
    if progress is not None:
        progress(0, count, f"drawing {count} task(s)")
        blocked = _counted(blocked, count, progress)
    tasks = _draw(generate, count, seed=seed, split=split, name=name, ceiling=ceiling,
                  blocked=blocked, blocking=bool(tests or exclude))
    if progress is not None:
        progress(count, count, "done")
    prefix, seen = f"gen-{name}-", set()
    for task in tasks:
        if not task.id.startswith(prefix) or task.id in bundled_ids or task.id in seen:
            raise ConfigError(f"the {name} generator made task id {task.id!r}: expected a new id starting with "
                              f"{prefix!r}, one per distinct task; fix the generator ({where}).")
        seen.add(task.id)
    if len(tasks) != count:
        raise ConfigError(f"the {name} generator made {len(tasks)} task(s), expected {count}.")
    return tasks


def _counted(blocked: Callable[[TaskSpec], bool], count: int,
             progress: Callable[[int, int | None, str], None]) -> Callable[[TaskSpec], bool]:
    """``blocked`` that reports how many drawn tasks it has checked (at most ``count`` shown)."""
    checked = 0

    def check(task: TaskSpec) -> bool:
        nonlocal checked
        checked += 1
        progress(min(checked, count), count, "checked against the test splits and excluded sets")
        return blocked(task)

    return check


def _draw(generate: Generate, count: int, *, seed: int, split: str | None, name: str,
          ceiling: Callable[[str | None], int] | None, blocked: Callable[[TaskSpec], bool],
          blocking: bool) -> list[TaskSpec]:
    want = count
    while True:
        try:
            made = generate(want, seed=seed, split=split)
        except ConfigError:
            if ceiling is None or not blocking:
                raise
            # Past the generator's end: all it makes, and how many of them pass.
            made = generate(int(ceiling(split)), seed=seed, split=split)
            tasks = [t for t in made if not blocked(t)]
            if len(tasks) < count:
                raise ConfigError(f"the {name} generator makes {len(tasks)} distinct task(s)"
                                  f"{f' in split {split!r}' if split else ''} outside the test splits and the "
                                  f"excluded sets, {count} were asked for; ask for fewer.") from None
            return tasks[:count]
        tasks = [t for t in made if not blocked(t)]
        if len(tasks) >= count:
            return tasks[:count]
        want += (count - len(tasks)) * 2


__all__ = ["EXCLUDE_KEYS", "blocker", "draw_checked"]
