"""Load AgentBench's DB tasks (``dbbench/dev.jsonl``, ``dbbench/standard.jsonl``) as DB task specs.

Each JSON line becomes a :class:`~agentunit_gym.domains.db.task.DBTask` with id
``<split>-<line:05d>`` (split = file stem, line = index among the file's non-empty
lines). The table is created the way AgentBench creates it: every column TEXT, in the
listed order, in a database and a table both named after ``table_name`` (the backends
quote identifiers, so any name is safe). SELECT-family items keep ``label`` as the gold
answer and ``sql.query`` as the reference query; INSERT / UPDATE / DELETE items keep
``label`` as the reference statement(s) and ``answer_md5`` as the expected table hash,
which the env uses on MySQL-compatible backends (elsewhere it replays the statement on a
pristine copy, as AgentBench's hashes need MySQL's exact semantics).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentunit_gym.domains.db.task import MODIFICATION_TYPES, DBTask
from agentunit_gym.errors import TaskFileError
from agentunit_gym.tasks.loader import LoadProblem, LoadResult

SPLIT_FILES: tuple[str, ...] = ("dev.jsonl", "standard.jsonl")
"""The dbbench files a directory is searched for, in this order."""


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TaskFileError(str(path), "no such file or directory; give AgentBench's data/ or data/dbbench/ "
                                       "folder, or one of its .jsonl files.")
    for folder in (path, path / "dbbench"):
        found = [folder / name for name in SPLIT_FILES if (folder / name).is_file()]
        if found:
            return found
    raise TaskFileError(str(path), f"found none of {', '.join(SPLIT_FILES)} here or in its dbbench/ folder.")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def agentbench_item_to_task(item: dict[str, Any], *, task_id: str, source: str) -> DBTask:
    """Convert one dbbench item into a task spec.

    Args:
        item: the parsed JSON object.
        task_id: the id to give the task.
        source: where the item came from (file and line), for messages.

    Returns:
        The task.

    Raises:
        TaskFileError: a field is missing or has the wrong shape.
    """
    def fail(message: str, field: str | None = None) -> TaskFileError:
        return TaskFileError(source, message, task_id=task_id, field=field)

    types = item.get("type")
    task_type = types[0] if isinstance(types, list) and len(types) == 1 else types
    if not isinstance(task_type, str):
        raise fail(f"'type' must be a one-element list, got {types!r}.", "type")
    table = item.get("table")
    info = table.get("table_info") if isinstance(table, dict) else None
    if not isinstance(table, dict) or not isinstance(info, dict) or not isinstance(table.get("table_name"), str):
        raise fail("'table' must hold 'table_name' and 'table_info' {columns, rows}.", "table")
    name = table["table_name"]
    columns = info.get("columns")
    rows = info.get("rows", [])
    if not isinstance(columns, list) or not all(isinstance(c, dict) and "name" in c for c in columns):
        raise fail("'table_info.columns' must be a list of {name, type}.", "table.table_info.columns")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise fail("'table_info.rows' must be a list of lists.", "table.table_info.rows")
    label = item.get("label")
    if not isinstance(label, list):
        raise fail(f"'label' must be a list, got {type(label).__name__}.", "label")
    data: dict[str, Any] = {
        "id": task_id,
        "instruction": item.get("description") or "",
        "description": item.get("add_description") or "",
        "type": task_type,
        # AgentBench creates every column as TEXT whatever the declared type.
        "tables": [{"name": name, "columns": [{"name": str(c["name"]), "type": "TEXT"} for c in columns],
                    "rows": [[_text(v) for v in row] for row in rows]}],
        "database": name,
        "source": source,
        "labels": ["agentbench"],
    }
    if task_type in MODIFICATION_TYPES:
        data["reference_sql"] = [str(s) for s in label]
        if item.get("answer_md5") is not None:
            data["answer_md5"] = str(item["answer_md5"])
    else:
        data["answer"] = [str(v) for v in label]
        query = (item.get("sql") or {}).get("query") if isinstance(item.get("sql"), dict) else None
        if isinstance(query, str) and query.strip():
            data["reference_sql"] = [query]
    try:
        return DBTask.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise fail(first["msg"], ".".join(str(p) for p in first["loc"]) or None) from exc


def load_agentbench_db(path: str | Path, *, problems: list[LoadProblem] | None = None) -> list[DBTask]:
    """Read AgentBench's dbbench tasks.

    Args:
        path: AgentBench's ``data/`` folder, its ``data/dbbench/`` folder, or one ``.jsonl`` file.
        problems: when given, a line that does not convert is appended here and the rest
            still load; when None, the first one raises.

    Returns:
        The tasks of every split found (dev first, then standard), ids ``<split>-<line:05d>``.

    Raises:
        TaskFileError: a missing path, a line that is not JSON, or an item that does not convert.
    """
    tasks: list[DBTask] = []
    for file in _files(Path(path)):
        split = file.stem
        # AgentBench's dbbench-dev and dbbench-std; a file of another name says nothing about its split.
        marked = {"dev": "dev", "standard": "test"}.get(split)
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            if problems is None:
                raise TaskFileError(str(file), f"cannot read the file ({exc}).") from exc
            problems.append(LoadProblem(str(file), f"cannot read the file ({exc})."))
            continue
        index = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            task_id = f"{split}-{index:05d}"
            index += 1  # ids count lines, so a bad line does not shift the ids after it
            try:
                task = _line_to_task(line, file=file, number=number, task_id=task_id)
                tasks.append(task.model_copy(update={"split": marked}) if marked else task)
            except TaskFileError as exc:
                if problems is None:
                    raise
                problems.append(LoadProblem(f"{file}:{number}", exc.message, task_id, exc.field))
    return tasks


def _line_to_task(line: str, *, file: Path, number: int, task_id: str) -> DBTask:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{file}:{number}", f"not valid JSON ({exc}).", task_id=task_id) from exc
    if not isinstance(item, dict):
        raise TaskFileError(f"{file}:{number}", "each line must be a JSON object.", task_id=task_id)
    return agentbench_item_to_task(item, task_id=task_id, source=f"{file}:{number}")


def is_agentbench_db(path: Path) -> bool:
    """Whether ``path`` is a dbbench ``.jsonl`` file or a folder holding AgentBench's dbbench files."""
    if path.is_file():
        return path.suffix == ".jsonl"
    try:
        _files(path)
    except (TaskFileError, OSError):
        return False
    return True


def collect_agentbench_db(path: Path) -> LoadResult:
    """Every dbbench split at ``path``; a line that does not convert is a problem, not a stop.

    Raises:
        TaskFileError: ``path`` holds no dbbench file.
    """
    problems: list[LoadProblem] = []
    tasks = load_agentbench_db(path, problems=problems)
    return LoadResult(tuple(tasks), tuple(problems))
