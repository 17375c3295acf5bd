"""``--tasks PATH``: which registered domain reads a task file or folder, and its tasks.

A path is a native task file or folder (YAML/JSON of a domain's task model) or something a
domain's :class:`~agentunit_gym.core.domain.TaskLoader` reads (AgentBench's data files and
folders). Every registered domain is asked, so a domain installed later gets ``--tasks``
for free. One item that does not convert is a problem to report, never a stop; a path from
which no task loads at all stops a run (``require_tasks``) instead of leaving the bundled
suite to run in its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentunit_gym.core.domain import Domain, LoadProblem, LoadResult
from agentunit_gym.core.registry import domains, get_domain
from agentunit_gym.errors import ConfigError, NoTasksError, TaskFileError
from agentunit_gym.tasks.spec import TaskSpec


@dataclass(frozen=True)
class TaskSource:
    """What one ``--tasks`` path held."""

    path: Path
    domain: Domain
    """The domain whose task model or loader read it."""
    format: str
    """``native`` or the loader's name (``agentbench``)."""
    result: LoadResult
    """The tasks that converted and one problem per item that did not."""


def load_path(path: str | Path, domain: str | None = None, fmt: str | None = None) -> list[TaskSource]:
    """Read ``path`` with every registered domain that recognises it, or with the named one.

    A foreign format is recognised by its loader's ``detect`` (AgentBench's ``data/`` folder
    holds the OS and the DB data: both domains read it, each its own part). A path no loader
    recognises is native: every domain's task model reads it, and the first whose tasks all
    validate wins, else the one that read the most (its problems are the ones worth showing).

    Raises:
        TaskFileError: the path does not exist, or no domain can read anything there.
        DomainError: an unknown domain was named.
        ConfigError: a format the named domain does not read.
    """
    p = Path(path)
    if not p.exists():
        raise TaskFileError(str(p), "no such file or folder.")
    if domain is not None:
        d = get_domain(domain)
        chosen = fmt or d.detect_format(p)
        return [TaskSource(p, d, chosen, d.load_tasks(p, format=chosen))]
    if fmt is None:
        detected = [(d, name) for d in domains() if (name := d.detect_format(p)) != "native"]
        if detected:
            return [TaskSource(p, d, name, d.load_tasks(p, format=name)) for d, name in detected]
    best: TaskSource | None = None
    error: TaskFileError | None = None
    for d in domains():
        chosen = fmt or "native"
        try:
            result = d.load_tasks(p, format=chosen)
        except TaskFileError as exc:
            error = error or exc
            continue
        except ConfigError:
            continue  # a format this domain does not read
        if result.tasks and not result.problems:
            return [TaskSource(p, d, chosen, result)]
        if best is None or len(result.tasks) > len(best.result.tasks):
            best = TaskSource(p, d, chosen, result)
    if best is None:
        raise error or TaskFileError(str(p), "no registered domain reads this path; pass --domain.")
    if not best.result.tasks and not best.result.problems:
        raise TaskFileError(str(p), "no task file here (native tasks are .yaml, .yml or .json; AgentBench data "
                                    "is its data/ folder or a .jsonl/.json file of it).")
    return [best]


def load_sources(paths: Sequence[str | Path], domain: str | None = None, *,
                 require_tasks: bool = False) -> list[TaskSource]:
    """:func:`load_path` for each path, in order.

    Args:
        paths: task files or folders.
        domain: read them with this domain only (default: the domain(s) that recognise each).
        require_tasks: every path must give at least one task (tasks to run: a path that gives
            none would leave its domain on the bundled suite); items that fail beside ones
            that load are still problems to report, not a stop.

    Raises:
        NoTasksError: ``require_tasks`` and no task loads from a path (every such path and
            its problems are named).
        TaskFileError, DomainError, ConfigError: see :func:`load_path`.
    """
    sources: list[TaskSource] = []
    empty: list[str] = []
    problems: list[str] = []
    for p in paths:
        found = load_path(p, domain)
        if require_tasks and not any(s.result.tasks for s in found):
            empty.append(str(p))
            problems += [str(problem) for problem in problems_of(found)] or [f"{p}: holds no task."]
        sources += found
    if empty:
        raise NoTasksError(empty, problems)
    return sources


def tasks_by_domain(sources: Sequence[TaskSource]) -> dict[str, list[TaskSpec]]:
    """The tasks of ``sources`` grouped by domain name (in the order read).

    Raises:
        ConfigError: two sources give the same task id in one domain.
    """
    grouped: dict[str, list[TaskSpec]] = {}
    seen: dict[tuple[str, str], Path] = {}
    for source in sources:
        for task in source.result.tasks:
            key = (source.domain.name, task.id)
            if key in seen:
                raise ConfigError(f"task id {task.id!r} is in both {seen[key]} and {source.path}; "
                                  "pass only one of them to --tasks.")
            seen[key] = source.path
            grouped.setdefault(source.domain.name, []).append(task)
    return grouped


def problems_of(sources: Sequence[TaskSource]) -> list[LoadProblem]:
    """Every item of ``sources`` that did not convert."""
    return [p for s in sources for p in s.result.problems]


__all__ = ["TaskSource", "load_path", "load_sources", "problems_of", "tasks_by_domain"]
