"""The table a modification task should leave, computed in Python from the task file's data.

Independent of any SQL engine: the bundled suite's INSERT / UPDATE / DELETE statements have a
few simple shapes, read here with regular expressions and applied to the task's rows; the
result is hashed with AgentBench's formula written out again (md5 over the sorted, comma-joined
first five hex digits of each row's md5 of its comma-joined cells, cut at 1024 characters).
A test that compares this with the env's hash after the oracle's episode fails if the oracle,
the engine's load, or the env's hash is wrong, which replaying the reference SQL cannot show.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from agentunit_gym.domains.db.task import DBTask

Row = list[Any]

_LITERAL = r"('(?:[^']|'')*'|-?\d+(?:\.\d+)?)"
_INSERT = re.compile(r"^INSERT INTO (\w+) \(([^)]*)\) VALUES \((.*)\)$", re.DOTALL)
_UPDATE = re.compile(r"^UPDATE (\w+) SET (.+?) WHERE (.+)$", re.DOTALL)
_DELETE = re.compile(r"^DELETE FROM (\w+) WHERE (.+)$", re.DOTALL)
_CONDITION = re.compile(rf"^(\w+) (=|<|>|<=|>=|LIKE) {_LITERAL}$")
_ASSIGNMENT = re.compile(rf"^(\w+) = (?:(\w+) \+ )?{_LITERAL}$")


def _literal(text: str) -> Any:
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return float(text) if "." in text else int(text)


def _split_values(text: str) -> list[str]:
    return [v.strip() for v in re.findall(rf"{_LITERAL}", text)]


def _typed(value: str | None, sql_type: str) -> Any:
    if value is None:
        return None
    kind = sql_type.lower()
    if "int" in kind:
        return int(float(value))
    if kind in ("real", "double", "float") or "decimal" in kind:
        return float(value)
    return value


def _holds(row: dict[str, Any], condition: str) -> bool:
    for part in condition.split(" AND "):
        found = _CONDITION.match(part.strip())
        assert found is not None, f"condition shape not handled: {part!r}"
        column, op, raw = found.groups()
        value, given = row[column], _literal(raw)
        if op == "LIKE":
            pattern = "^" + re.escape(str(given)).replace("%", ".*").replace("_", ".") + "$"
            ok = re.match(pattern, str(value), re.IGNORECASE) is not None
        elif op == "=":
            ok = value == given
        else:
            ok = {"<": value < given, ">": value > given, "<=": value <= given, ">=": value >= given}[op]
        if not ok:
            return False
    return True


def expected_rows(task: DBTask) -> tuple[list[str], list[Row]]:
    """The graded table's column names and rows after the task's intended change."""
    table = task.graded_table
    names = [c.name for c in table.columns]
    types = {c.name: c.type for c in table.columns}
    rows = [{n: _typed(v, types[n]) for n, v in zip(names, raw, strict=True)} for raw in table.rows]
    for statement in task.reference_sql:
        text = " ".join(statement.split())
        if (m := _INSERT.match(text)) is not None:
            columns = [c.strip() for c in m.group(2).split(",")]
            values = [_literal(v) for v in _split_values(m.group(3))]
            assert len(columns) == len(values), text
            rows.append({n: None for n in names} | dict(zip(columns, values, strict=True)))
        elif (m := _UPDATE.match(text)) is not None:
            assignments = [_ASSIGNMENT.match(a.strip()) for a in m.group(2).split(",")]
            assert all(assignments), f"assignment shape not handled: {text!r}"
            for row in rows:
                if _holds(row, m.group(3)):
                    for a in assignments:
                        assert a is not None
                        column, base, raw = a.groups()
                        row[column] = (row[base] + _literal(raw)) if base else _literal(raw)
        elif (m := _DELETE.match(text)) is not None:
            rows = [row for row in rows if not _holds(row, m.group(2))]
        else:
            raise AssertionError(f"statement shape not handled: {text!r}")
    return names, [[row[n] for n in names] for row in rows]


def _as_text(value: Any) -> str:
    # How MySQL's CONCAT_WS prints a cell: a whole DOUBLE without ".0".
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def agentbench_hash(rows: list[Row]) -> str:
    """AgentBench's table hash of ``rows`` ("" for no rows, as the env reports SQL NULL)."""
    if not rows:
        return ""
    row_hashes = sorted(
        hashlib.md5(",".join(_as_text(v) for v in row if v is not None).encode("utf-8")).hexdigest()[:5]
        for row in rows
    )
    return hashlib.md5(",".join(row_hashes)[:1024].encode("utf-8")).hexdigest()
