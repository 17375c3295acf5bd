"""Read task files (YAML or JSON) into validated task specs, with errors that say where."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from agentunit_gym.errors import TaskFileError
from agentunit_gym.tasks.spec import TaskSpec

T = TypeVar("T", bound=TaskSpec)

TASK_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class LoadProblem:
    """One item of a task file that did not convert; the others still load."""

    source: str
    """The file (and ``#index`` of the item in it)."""
    message: str
    """What is wrong and what to do."""
    task_id: str | None = None
    """The item's task id, when it has one."""
    field: str | None = None
    """The dotted field path that failed, when known."""

    def __str__(self) -> str:
        where = self.source
        if self.task_id is not None:
            where += f", task {self.task_id!r}"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class LoadResult:
    """What a loader read: the tasks that converted, and a problem per item that did not.

    One bad item never stops a file: it becomes a :class:`LoadProblem` and the rest load.
    """

    tasks: tuple[TaskSpec, ...]
    problems: tuple[LoadProblem, ...] = ()

    def raise_first(self) -> None:
        """Raise the first problem as a :class:`TaskFileError` (for callers that want all or nothing)."""
        if self.problems:
            first = self.problems[0]
            raise TaskFileError(first.source, first.message, task_id=first.task_id, field=first.field)


def read_task_text(path: Path) -> str:
    """A task file's text, or a :class:`TaskFileError` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(str(path), f"cannot read the file ({exc}).") from exc


def _read_items(path: Path) -> list[Any]:
    text = read_task_text(path)
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise TaskFileError(str(path), f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from exc
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise TaskFileError(
            str(path), f"expected a task, a list of tasks or {{tasks: [...]}}, found {type(data).__name__}."
        )
    return data


def parse_tasks(items: Iterable[Any], model: type[T], *, path: str, first_index: int = 0) -> list[T]:
    """Validate raw task mappings; the first failure raises :class:`TaskFileError`.

    ``first_index`` is the position of the first item in its file (for ``source``).
    """
    tasks: list[T] = []
    for index, item in enumerate(items, start=first_index):
        task_id = item.get("id") if isinstance(item, dict) else None
        label = str(task_id) if task_id is not None else f"#{index}"
        if not isinstance(item, dict):
            raise TaskFileError(path, f"item {index} is a {type(item).__name__}, expected a mapping.", task_id=label)
        item = {**item}
        item.setdefault("source", f"{path}#{index}")
        try:
            tasks.append(model.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or None
            raise TaskFileError(path, f"{first['msg']} ({len(exc.errors())} error(s) in this task).",
                                task_id=label, field=where) from exc
    return tasks


def collect_tasks(paths: str | Path | Sequence[str | Path], model: type[TaskSpec]) -> LoadResult:
    """Load task files like :func:`load_tasks`, but keep going past bad items.

    Returns:
        The tasks that validate, and one :class:`LoadProblem` per file that cannot be read
        and per item that does not validate (or repeats an id).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    tasks: list[TaskSpec] = []
    problems: list[LoadProblem] = []
    seen: dict[str, str] = {}
    for entry in paths:
        p = Path(entry)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.suffix in TASK_SUFFIXES and f.is_file())
        elif p.is_file():
            files = [p]
        else:
            problems.append(LoadProblem(str(p), "no such file or directory."))
            continue
        for f in files:
            try:
                items = _read_items(f)
            except TaskFileError as exc:
                problems.append(LoadProblem(exc.path, exc.message))
                continue
            for index, item in enumerate(items):
                try:
                    (task,) = parse_tasks([item], model, path=str(f), first_index=index)
                except TaskFileError as exc:
                    problems.append(LoadProblem(str(f), exc.message, exc.task_id, exc.field))
                    continue
                if task.id in seen:
                    problems.append(LoadProblem(str(f), f"duplicate task id, first defined in {seen[task.id]}.",
                                                task.id))
                    continue
                seen[task.id] = str(f)
                tasks.append(task)
    return LoadResult(tuple(tasks), tuple(problems))


def load_task_file(path: str | Path, model: type[T]) -> list[T]:
    """Load every task in one YAML or JSON file."""
    p = Path(path)
    return parse_tasks(_read_items(p), model, path=str(p))


def load_tasks(paths: str | Path | Sequence[str | Path], model: type[T]) -> list[T]:
    """Load tasks from files and directories (recursively, sorted by path); ids must be unique."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for entry in paths:
        p = Path(entry)
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*") if f.suffix in TASK_SUFFIXES and f.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise TaskFileError(str(p), "no such file or directory.")
    tasks: list[T] = []
    seen: dict[str, str] = {}
    for f in files:
        for task in load_task_file(f, model):
            if task.id in seen:
                raise TaskFileError(str(f), f"duplicate task id, first defined in {seen[task.id]}.", task_id=task.id)
            seen[task.id] = str(f)
            tasks.append(task)
    return tasks


def load_suite(folder: str | Path, model: type[T]) -> list[T]:
    """A bundled suite folder, parsed once per process (task specs are frozen).

    Raises:
        TaskFileError: a file of the suite does not validate.
    """
    return [task for task in _load_suite_cached(Path(folder), model) if isinstance(task, model)]


@functools.cache
def _load_suite_cached(folder: Path, model: type[TaskSpec]) -> tuple[TaskSpec, ...]:
    # Every env construction loads its suite; parsing the bundled YAML costs ~0.4 s, which an
    # evaluator making one env per concurrent slot paid once per slot.
    return tuple(load_tasks(folder, model))
