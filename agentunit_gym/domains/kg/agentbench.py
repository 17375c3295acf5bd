"""Read AgentBench's knowledge-graph items (``data/knowledgegraph/dev.json``, ``std.json``).

Each file is a JSON list of items with ``question``, ``entities`` (name -> Freebase mid),
``actions`` (the reference calls, e.g. ``get_neighbors(m.0abc,some.relation)``),
``s_expression`` and ``answer`` (a list of ``{"answer_type", "answer_argument",
"entity_name"}``; the gold set is the ``answer_argument`` values, as AgentBench grades).
Task ids are ``<file stem>-<index:05d>`` (``dev-00003``), the item's position in its
file, as AgentBench indexes its samples. The tasks are about Freebase (``graph:
freebase``): run them on ``backend="sparql"`` against a Freebase endpoint set up as
AgentBench documents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentunit_gym.domains.kg.task import KGTask
from agentunit_gym.errors import TaskFileError
from agentunit_gym.tasks.loader import LoadProblem, LoadResult

SPLITS = ("dev.json", "std.json")

FREEBASE_NOTE = ("about Freebase: runs only in a KG env given a Freebase SPARQL endpoint "
                 "(--env-option KG-v0:endpoint=http://HOST:PORT/sparql), apart from tasks of the bundled graph")


def looks_like_agentbench_kg(path: Path) -> bool:
    """Whether ``path`` is an AgentBench KG file or a folder holding one (cheap sniff of the first item)."""
    if path.is_dir():
        return any((path / name).is_file() or (path / "knowledgegraph" / name).is_file() for name in SPLITS)
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("[") and '"question"' in head and '"id"' not in head.split("}", 1)[0]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    for folder in (path, path / "knowledgegraph"):
        found = [folder / name for name in SPLITS if (folder / name).is_file()]
        if found:
            return found
    raise TaskFileError(str(path), "no dev.json or std.json here (give AgentBench's data/ or data/knowledgegraph/).")


def item_to_task(item: dict[str, Any], *, task_id: str, source: str) -> KGTask:
    """One AgentBench KG item as a task.

    Raises:
        TaskFileError: a field is missing or has the wrong shape.
    """
    answers = item.get("answer")
    if not isinstance(answers, list) or not answers:
        raise TaskFileError(source, "'answer' must be a non-empty list of {answer_argument: ...}.", task_id=task_id)
    gold = [str(a.get("answer_argument")) if isinstance(a, dict) else str(a) for a in answers]
    names = [str(a.get("entity_name", a.get("answer_argument"))) if isinstance(a, dict) else str(a) for a in answers]
    data = {
        "id": task_id,
        "question": item.get("question"),
        "entities": item.get("entities") or {},
        "actions": item.get("actions"),
        "answer": gold,
        "answer_names": names,
        "s_expression": item.get("s_expression"),
        "graph": "freebase",
        # Why a run beside tasks of the bundled graph leaves it out (`tasks check` prints it).
        "backend_note": FREEBASE_NOTE,
        "category": _category(item.get("s_expression")),
        "labels": [str(item["source"])] if item.get("source") else [],
        "source": source,
    }
    try:
        return KGTask.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TaskFileError(source, first["msg"], task_id=task_id,
                            field=".".join(str(p) for p in first["loc"]) or None) from exc


def _category(s_expression: Any) -> str:
    text = str(s_expression or "")
    markers = (("(COUNT", "count"), ("(ARGMAX", "argmax"), ("(ARGMIN", "argmin"), ("(AND", "intersection"))
    for marker, category in markers:
        if text.startswith(marker):
            return category
    return "general"


def load_agentbench_kg(path: str | Path, *, problems: list[LoadProblem] | None = None) -> list[KGTask]:
    """Read AgentBench's KG tasks.

    Args:
        path: AgentBench's ``data/`` folder, its ``data/knowledgegraph/`` folder, or one JSON file.
        problems: when given, an item that does not convert is appended here and the rest
            load; when None, the first such item raises.

    Returns:
        The tasks of every split found (dev first, then std), ids ``<split>-<index:05d>``.

    Raises:
        TaskFileError: a missing path, a file that is not a JSON list, or (``problems`` None)
            an item that does not convert.
    """
    tasks: list[KGTask] = []
    for file in _files(Path(path)):
        try:
            items = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TaskFileError(str(file), f"cannot read it as JSON ({exc}).") from exc
        if not isinstance(items, list):
            raise TaskFileError(str(file), "expected a JSON list of items.")
        marked = {"dev": "dev", "std": "test"}.get(file.stem)  # AgentBench's dev.json and std.json
        for index, item in enumerate(items):
            task_id = f"{file.stem}-{index:05d}"
            try:
                if not isinstance(item, dict):
                    raise TaskFileError(str(file), f"item {index} is not an object.", task_id=task_id)
                task = item_to_task(item, task_id=task_id, source=f"{file}#{index}")
                tasks.append(task.model_copy(update={"split": marked}) if marked else task)
            except TaskFileError as exc:
                if problems is None:
                    raise
                problems.append(LoadProblem(f"{file}#{index}", str(exc), task_id=task_id))
    return tasks


def collect_agentbench_kg(path: Path) -> LoadResult:
    """Every KG split at ``path``; an item that does not convert is a problem, not a stop.

    Raises:
        TaskFileError: ``path`` holds no KG file.
    """
    problems: list[LoadProblem] = []
    tasks = load_agentbench_kg(path, problems=problems)
    return LoadResult(tuple(tasks), tuple(problems))
