"""The DB task spec: tables to load, a question or instruction, and how to grade it.

A DB task follows AgentBench's dbbench item: a ``type`` (a SELECT-family category, or
``INSERT`` / ``UPDATE`` / ``DELETE``), the tables loaded into the episode database, a
description of the table shown to the agent, and the gold answer (SELECT family) or the
reference statements whose effect the agent must reproduce (modifications).

When a task file gives no ``reference_solution``, one is derived: run the reference SQL
with ``execute_sql``, then ``submit_answer`` the gold values (SELECT family) or ``commit``
(modifications). ``category`` always equals ``type``, so per-category metrics line up
with AgentBench's types.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentunit_gym.backends.sql.base import Column, TableData
from agentunit_gym.tasks.spec import AnswerKey, TaskSpec

DBTaskType = Literal[
    "other",
    "counting",
    "comparison",
    "ranking",
    "aggregation-SUM",
    "aggregation-MIN",
    "aggregation-MAX",
    "aggregation-AVG",
    "INSERT",
    "UPDATE",
    "DELETE",
]
"""AgentBench's dbbench types: eight SELECT-family categories and three modifications."""

DB_TASK_TYPES: tuple[str, ...] = get_args(DBTaskType)
MODIFICATION_TYPES: frozenset[str] = frozenset({"INSERT", "UPDATE", "DELETE"})
SELECT_TYPES: frozenset[str] = frozenset(DB_TASK_TYPES) - MODIFICATION_TYPES


def type_family(task_type: str) -> str:
    """``SELECT`` for every SELECT-family category, else the type itself (``INSERT`` ...)."""
    return task_type if task_type in MODIFICATION_TYPES else "SELECT"


class DBColumn(BaseModel):
    """One column of a task table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    """Column name, used verbatim (the backend quotes it)."""
    type: str = "TEXT"
    """SQL type used to create the column; AgentBench items use TEXT for every column."""


class DBTable(BaseModel):
    """A table loaded into the episode database before the first turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    """Table name, used verbatim (the backend quotes it)."""
    columns: tuple[DBColumn, ...] = Field(min_length=1)
    """Columns in creation order; the table hash concatenates them in this order."""
    rows: tuple[tuple[str | None, ...], ...] = ()
    """Rows of cells as strings (None is SQL NULL); the engine converts them to the column types."""

    @model_validator(mode="before")
    @classmethod
    def _cells_as_text(cls, data: Any) -> Any:
        # YAML reads 3 as an int and 1.5 as a float; cells are text by definition.
        if isinstance(data, dict) and isinstance(data.get("rows"), (list, tuple)):
            data = {**data, "rows": [
                [None if c is None else str(c) for c in row] if isinstance(row, (list, tuple)) else row
                for row in data["rows"]
            ]}
        return data

    @model_validator(mode="after")
    def _row_widths(self) -> DBTable:
        width = len(self.columns)
        for index, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"row {index} of table {self.name!r} has {len(row)} cells, expected {width}")
        return self

    def to_table_data(self) -> TableData:
        """The backend's table description."""
        return TableData(self.name, tuple(Column(c.name, c.type) for c in self.columns), self.rows)


class DBTask(TaskSpec):
    """A DB task (AgentBench dbbench semantics)."""

    type: DBTaskType
    """The task type: a SELECT-family category, or INSERT, UPDATE, DELETE."""
    tables: tuple[DBTable, ...] = Field(min_length=1)
    """Tables of the episode database; the first one is graded for modification tasks."""
    description: str = ""
    """Description of the table(s) shown after the question (AgentBench's ``add_description``)."""
    answer: tuple[str, ...] | None = None
    """Gold answer values (SELECT family); order does not matter when there are several."""
    reference_sql: tuple[str, ...] = ()
    """SELECT family: the query that yields ``answer`` (optional). Modifications: the
    statement(s) whose effect on the first table is the goal; the expected table hash comes
    from replaying them on a pristine copy on the same backend."""
    answer_md5: str | None = None
    """Expected table hash of the first table after the modification (hex, or AgentBench's
    ``"[('<hex>',)]"``); used instead of replaying ``reference_sql`` on MySQL-compatible backends."""
    database: str | None = None
    """Name of the episode database (AgentBench names it after the table); None: a unique name."""

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        task_type = data.get("type")
        if isinstance(task_type, list) and len(task_type) == 1:  # AgentBench writes ["counting"]
            task_type = data["type"] = task_type[0]
        if isinstance(data.get("reference_sql"), str):
            data["reference_sql"] = [data["reference_sql"]]
        if isinstance(data.get("answer"), (list, tuple)):
            data["answer"] = [str(a) for a in data["answer"]]
        if isinstance(task_type, str):
            data.setdefault("category", task_type)
        if not data.get("reference_solution") and isinstance(task_type, str):
            steps: list[dict[str, Any]] = [{"execute_sql": q} for q in data.get("reference_sql") or ()]
            if task_type in MODIFICATION_TYPES:
                steps.append({"commit": {}})
            else:
                steps.append({"submit_answer": {"answer": list(data.get("answer") or [])}})
            data["reference_solution"] = steps
        return data

    @model_validator(mode="after")
    def _consistent(self) -> DBTask:
        if self.category != self.type:
            raise ValueError(f"category must equal type ({self.type!r}), got {self.category!r}")
        if self.type in SELECT_TYPES and self.answer is None:
            raise ValueError(f"a {self.type!r} task needs 'answer' (the gold values)")
        if self.type in MODIFICATION_TYPES and not self.reference_sql:
            raise ValueError(f"a {self.type!r} task needs 'reference_sql' (the statements that make the change)")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(f"table names must be unique, got {names}")
        return self

    @property
    def family(self) -> str:
        """``SELECT``, ``INSERT``, ``UPDATE`` or ``DELETE``."""
        return type_family(self.type)

    @property
    def is_modification(self) -> bool:
        return self.type in MODIFICATION_TYPES

    def answer_key(self) -> AnswerKey | None:
        """The gold values of a SELECT-family task, which the agent's ``Final Answer:`` states
        (compare with :func:`~agentunit_gym.domains.db.scoring.answers_match`); None for a
        modification, graded by the table's hash after the episode."""
        if self.is_modification or self.answer is None:
            return None
        return AnswerKey(json.dumps(list(self.answer), ensure_ascii=False), in_reply=True)

    @property
    def graded_table(self) -> DBTable:
        """The table whose hash grades a modification task."""
        return self.tables[0]

    def table_data(self) -> list[TableData]:
        """Every table in the backend's form."""
        return [t.to_table_data() for t in self.tables]
