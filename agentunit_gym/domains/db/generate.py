"""Generated DB tasks: query families x parameters over the bundled suite's ten tables.

Each family (``gen-db/<name>``) is a SQL shape with holes: a table, its numeric and text
columns, thresholds and values drawn from the table's own data. SELECT families get their
gold answer by running the reference query on the sqlite backend (the embedded default)
over the same rows an episode gets; INSERT, UPDATE and DELETE families are graded as every
DB task is, by the table hash after replaying the reference statements on a pristine copy,
and a statement is only kept when it changes the table (an UPDATE or DELETE that matches at
least one row, not every row for a DELETE). The candidate pool is fixed (the INSERT and
UPDATE values come from a generator with a fixed seed); ``seed`` only decides the draw.

Example:

    >>> from agentunit_gym.domains.db.generate import ceiling, generate
    >>> from agentunit_gym.tasks.overlap import content_id
    >>> tasks = generate(100, seed=0, split="train")
    >>> len(tasks), tasks[0].id == content_id("db", tasks[0].template, tasks[0].reference_sql[0])
    (100, True)
    >>> tasks[0].id == generate(100, seed=0, split="train")[0].id  # seeded: the same set again
    True
    >>> tasks[0].id in {t.id for t in generate(ceiling(), seed=1)}  # the same task has one id in every seed
    True
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentunit_gym.backends.sql.sqlite import SQLiteBackend, SQLiteEpisode
from agentunit_gym.domains.db.task import DBTable, DBTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import content_id
from agentunit_gym.tasks.splits import split_of_family

MAX_ANSWERS = 10
"""SELECT candidates with more answer values than this are not kept."""
MUTATIONS_PER_TABLE = 300
"""INSERT candidates per table (each a different row), and UPDATE value draws per (table, column pair)."""


@dataclass(frozen=True)
class Candidate:
    """One generated task before it gets its id."""

    template: str
    type: str
    instruction: str
    sql: str
    table: str
    answer: tuple[str, ...] | None


@dataclass
class _Table:
    spec: DBTable
    description: str
    episode: SQLiteEpisode
    numeric: list[str]
    text: list[str]
    categorical: list[str]
    keys: list[str]

    @property
    def name(self) -> str:
        return self.spec.name

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        result = self.episode.admin_query(sql)
        if not result.ok:
            raise ConfigError(f"generated query {sql!r} failed on sqlite: {result.error}; fix the DB generator.")
        return [tuple(r) for r in result.rows]

    def values(self, column: str) -> list[Any]:
        return [r[0] for r in self.query(f"SELECT DISTINCT {column} FROM {self.name} WHERE {column} IS NOT NULL "
                                         f"ORDER BY {column}")]


def _literal(value: Any) -> str:
    """A value as SQL both sqlite and MySQL read the same way."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return _literal(value)


def _answer(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return repr(round(value, 4)) if not value.is_integer() else str(int(value))
    return str(value)


def _tables() -> list[_Table]:
    from agentunit_gym.core.registry import get_domain

    backend = SQLiteBackend()
    out: list[_Table] = []
    seen: set[str] = set()
    for task in get_domain("db").bundled_tasks():
        if not isinstance(task, DBTask) or len(task.tables) != 1 or task.tables[0].name in seen:
            continue
        spec = task.tables[0]
        seen.add(spec.name)
        episode = backend.open_episode([spec.to_table_data()])
        numeric = [c.name for c in spec.columns if c.type.upper() in ("REAL", "INTEGER")]
        text = [c.name for c in spec.columns if c.type.upper() == "TEXT"]
        table = _Table(spec, task.description, episode, numeric, text, [], [])
        rows = len(spec.rows)
        for column in text:
            distinct = len(table.values(column))
            if distinct == rows:
                table.keys.append(column)
            elif 2 <= distinct <= rows // 2:
                table.categorical.append(column)
        out.append(table)
    return sorted(out, key=lambda t: t.name)


def _select(t: _Table, template: str, kind: str, instruction: str, sql: str) -> Iterator[Candidate]:
    rows = t.query(sql)
    values = [a for r in rows if (a := _answer(r[0])) is not None]
    if not values or len(values) > MAX_ANSWERS or len(values) != len(rows):
        return
    if kind == "counting" and values == ["0"]:
        return
    yield Candidate(template, kind, instruction, sql, t.name, tuple(values))


_AGGREGATES = (("SUM", "the total of", "aggregation-SUM"), ("AVG", "the average of", "aggregation-AVG"),
               ("MIN", "the smallest", "aggregation-MIN"), ("MAX", "the largest", "aggregation-MAX"))


def _select_candidates(t: _Table) -> Iterator[Candidate]:
    name = t.name
    for n in t.numeric:
        for v in t.values(n)[:-1]:
            yield from _select(t, "gen-db/count-above", "counting",
                               f"In the {name} table, how many rows have {n} greater than {_shown(v)}?",
                               f"SELECT COUNT(*) FROM {name} WHERE {n} > {_literal(v)}")
        for v in t.values(n)[1:]:
            yield from _select(t, "gen-db/count-below", "counting",
                               f"How many rows of the {name} table have a {n} below {_shown(v)}?",
                               f"SELECT COUNT(*) FROM {name} WHERE {n} < {_literal(v)}")
    for c in t.categorical:
        for x in t.values(c):
            yield from _select(t, "gen-db/count-text", "counting",
                               f"How many rows of the {name} table have {c} equal to {_shown(x)}?",
                               f"SELECT COUNT(*) FROM {name} WHERE {c} = {_literal(x)}")
            for n in t.numeric:
                for v in t.values(n)[::3]:
                    yield from _select(t, "gen-db/count-text-above", "counting",
                                       f"In the {name} table, count the rows whose {c} is {_shown(x)} and whose {n} "
                                       f"is at least {_shown(v)}.",
                                       f"SELECT COUNT(*) FROM {name} WHERE {c} = {_literal(x)} "
                                       f"AND {n} >= {_literal(v)}")
                for fn, words, kind in _AGGREGATES:
                    yield from _select(t, f"gen-db/{fn.lower()}-by-text", kind,
                                       f"What is {words} {n} over the rows of the {name} table whose {c} is "
                                       f"{_shown(x)}?",
                                       f"SELECT {fn}({n}) FROM {name} WHERE {c} = {_literal(x)}")
            yield from _distinct_and_compare(t, c, x)
    for n, m in itertools.permutations(t.numeric, 2):
        for v in t.values(m)[1:-1:2]:
            for fn, words, kind in _AGGREGATES:
                yield from _select(t, f"gen-db/{fn.lower()}-by-threshold", kind,
                                   f"In the {name} table, what is {words} {n} among the rows with {m} above "
                                   f"{_shown(v)}?",
                                   f"SELECT {fn}({n}) FROM {name} WHERE {m} > {_literal(v)}")
        yield from _select(t, "gen-db/compare-columns", "comparison",
                           f"How many rows of the {name} table have a larger {n} than {m}?",
                           f"SELECT COUNT(*) FROM {name} WHERE {n} > {m}")
    for k in t.keys:
        for n in t.numeric:
            for word, order in (("highest", "DESC"), ("lowest", "ASC")):
                values = t.query(f"SELECT {n} FROM {name} WHERE {n} IS NOT NULL ORDER BY {n} {order} LIMIT 4")
                if len(values) >= 2 and values[0][0] != values[1][0]:
                    yield from _select(t, "gen-db/rank-top", "ranking",
                                       f"In the {name} table, which {k} has the {word} {n}?",
                                       f"SELECT {k} FROM {name} ORDER BY {n} {order} LIMIT 1")
                if len(values) >= 4 and values[2][0] != values[3][0]:
                    yield from _select(t, "gen-db/rank-top3", "ranking",
                                       f"List the {k} of the three rows of the {name} table with the {word} {n}.",
                                       f"SELECT {k} FROM {name} ORDER BY {n} {order} LIMIT 3")
            for c in t.categorical:
                for x in t.values(c):
                    values = t.query(f"SELECT {n} FROM {name} WHERE {c} = {_literal(x)} AND {n} IS NOT NULL "
                                     f"ORDER BY {n} DESC LIMIT 2")
                    if len(values) == 2 and values[0][0] != values[1][0]:
                        yield from _select(t, "gen-db/rank-top-in-group", "ranking",
                                           f"Among the rows of the {name} table whose {c} is {_shown(x)}, which {k} "
                                           f"has the highest {n}?",
                                           f"SELECT {k} FROM {name} WHERE {c} = {_literal(x)} "
                                           f"ORDER BY {n} DESC LIMIT 1")


def _distinct_and_compare(t: _Table, c: str, x: Any) -> Iterator[Candidate]:
    name = t.name
    for other in t.categorical:
        if other != c:
            yield from _select(t, "gen-db/distinct-in-group", "other",
                               f"How many different values of {other} appear in the rows of the {name} table whose "
                               f"{c} is {_shown(x)}?",
                               f"SELECT COUNT(DISTINCT {other}) FROM {name} WHERE {c} = {_literal(x)}")
    for n, m in itertools.permutations(t.numeric, 2):
        yield from _select(t, "gen-db/compare-columns-in-group", "comparison",
                           f"Among the rows of the {name} table whose {c} is {_shown(x)}, how many have a larger {n} "
                           f"than {m}?",
                           f"SELECT COUNT(*) FROM {name} WHERE {c} = {_literal(x)} AND {n} > {m}")


def _count(t: _Table, where: str) -> int:
    return int(t.query(f"SELECT COUNT(*) FROM {t.name} WHERE {where}")[0][0])


def _new_value(rng: random.Random, t: _Table, column: str) -> Any:
    kind = next(c.type.upper() for c in t.spec.columns if c.name == column)
    if kind == "INTEGER":
        return rng.randint(0, 5000)
    if kind == "REAL":
        return round(rng.uniform(0, 500), 1)
    return rng.choice(("north", "south", "east", "west", "alpha", "beta", "gamma", "delta")) + f"-{rng.randint(1, 999)}"


def _mutation_candidates(t: _Table) -> Iterator[Candidate]:
    name = t.name
    rows = len(t.spec.rows)
    rng = random.Random(f"gen-db-mutations:{name}")
    for n in t.numeric:
        for v in t.values(n)[1:]:
            if 0 < _count(t, f"{n} < {_literal(v)}") < rows:
                yield Candidate("gen-db/delete-below", "DELETE",
                                f"Delete every row of the {name} table whose {n} is below {_shown(v)}.",
                                f"DELETE FROM {name} WHERE {n} < {_literal(v)}", name, None)
    for c in t.categorical:
        for x in t.values(c):
            yield Candidate("gen-db/delete-text", "DELETE",
                            f"Remove the rows of the {name} table whose {c} is {_shown(x)}.",
                            f"DELETE FROM {name} WHERE {c} = {_literal(x)}", name, None)
            for n in t.numeric:
                for _ in range(MUTATIONS_PER_TABLE // max(1, len(t.values(c)) * len(t.numeric))):
                    value = _new_value(rng, t, n)
                    if _count(t, f"{c} = {_literal(x)} AND ({n} IS NULL OR {n} <> {_literal(value)})"):
                        yield Candidate("gen-db/update-text", "UPDATE",
                                        f"In the {name} table, set {n} to {_shown(value)} in every row whose {c} is "
                                        f"{_shown(x)}.",
                                        f"UPDATE {name} SET {n} = {_literal(value)} WHERE {c} = {_literal(x)}",
                                        name, None)
        for n in t.numeric:
            for v in t.values(n)[1:-1]:
                label = _new_value(rng, t, c)
                if _count(t, f"{n} > {_literal(v)}"):
                    yield Candidate("gen-db/update-threshold", "UPDATE",
                                    f"In the {name} table, change {c} to {_shown(label)} for every row with {n} "
                                    f"greater than {_shown(v)}.",
                                    f"UPDATE {name} SET {c} = {_literal(label)} WHERE {n} > {_literal(v)}", name, None)
    columns = [c.name for c in t.spec.columns]
    for _ in range(MUTATIONS_PER_TABLE):
        values = [_new_value(rng, t, c) for c in columns]
        shown = ", ".join(f"{c} = {_shown(v)}" for c, v in zip(columns, values, strict=True))
        yield Candidate("gen-db/insert-row", "INSERT", f"Add a row to the {name} table with {shown}.",
                        f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({', '.join(_literal(v) for v in values)})",
                        name, None)


TEMPLATES: tuple[str, ...] = tuple(sorted({
    "gen-db/count-above", "gen-db/count-below", "gen-db/count-text", "gen-db/count-text-above",
    *(f"gen-db/{fn.lower()}-by-{how}" for fn, _, _ in _AGGREGATES for how in ("text", "threshold")),
    "gen-db/compare-columns", "gen-db/compare-columns-in-group", "gen-db/distinct-in-group",
    "gen-db/rank-top", "gen-db/rank-top3", "gen-db/rank-top-in-group",
    "gen-db/delete-below", "gen-db/delete-text", "gen-db/update-text", "gen-db/update-threshold", "gen-db/insert-row",
}))
"""Every family the DB generator makes."""


def templates() -> tuple[str, ...]:
    """Every family the DB generator makes."""
    return TEMPLATES


@functools.cache
def _pool() -> tuple[tuple[Candidate, ...], dict[str, tuple[DBTable, str]]]:
    tables = _tables()
    seen: set[str] = set()
    out: list[Candidate] = []
    try:
        for t in tables:
            for c in itertools.chain(_select_candidates(t), _mutation_candidates(t)):
                if c.sql not in seen:
                    seen.add(c.sql)
                    out.append(c)
    finally:
        for t in tables:
            t.episode.close()
    return tuple(out), {t.name: (t.spec, t.description) for t in tables}


def candidates() -> Sequence[Candidate]:
    """Every task the families make over the bundled tables, one per distinct statement, in a fixed order."""
    return _pool()[0]


def ceiling(split: str | None = None) -> int:
    """How many distinct tasks the families make (of ``split``'s families only)."""
    return sum(1 for c in candidates() if split is None or split_of_family(c.template) == split)


def generate(count: int, *, seed: int = 0, split: str | None = None) -> list[DBTask]:
    """``count`` distinct tasks drawn with ``seed`` from :func:`candidates` (of ``split``'s families only).

    A task's id names its statement (``gen-db-<family>-<hash>``, see
    :func:`~agentunit_gym.tasks.overlap.content_id`): the same in every seed and set.

    Raises:
        ConfigError: more tasks asked for than the families make.
    """
    pool, tables = _pool()
    chosen = [c for c in pool if split is None or split_of_family(c.template) == split]
    if count > len(chosen):
        raise ConfigError(f"the DB families make {len(chosen)} distinct task(s)"
                          f"{f' in split {split!r}' if split else ''}, {count} were asked for; ask for fewer.")
    order = list(range(len(chosen)))
    random.Random(f"gen-db:{seed}").shuffle(order)
    tasks = []
    for position in order[:count]:
        c = chosen[position]
        spec, description = tables[c.table]
        data: dict[str, Any] = {
            "id": content_id("db", c.template, c.sql),
            "type": c.type,
            "instruction": c.instruction,
            "description": description,
            "reference_sql": [c.sql],
            "tables": [spec],
            "template": c.template,
            "split": split_of_family(c.template),
        }
        if c.answer is not None:
            data["answer"] = list(c.answer)
        tasks.append(DBTask.model_validate(data))
    return tasks
