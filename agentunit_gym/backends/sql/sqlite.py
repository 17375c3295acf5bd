"""The embedded SQL backend: SQLite, in process, one in-memory database per episode.

Each episode gets its own connection to a private ``:memory:`` database, so episodes cannot
see each other and closing the connection is the drop. The agent's statements run under an
authorizer that refuses what could reach outside that database (``ATTACH``, ``VACUUM
INTO`` a file, pragmas that change the engine) and a progress handler that interrupts a
statement past its deadline; the connection stays usable after a timeout.

SQLite's dialect is not MySQL's (types, string functions, collation); tasks that run on
both backends must have reference answers that agree on both.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any

from agentunit_gym.backends.sql.base import (
    EpisodeDatabase,
    QueryResult,
    SQLBackend,
    TableData,
    check_limits,
    fetch_capped,
)
from agentunit_gym.backends.sql.hashing import (
    HASH_TIMEOUT_S,
    check_tables,
    hash_from_result,
    quote_sqlite_identifier,
    register_sqlite_functions,
    sqlite_table_hash_sql,
    table_statements,
)
from agentunit_gym.errors import ConfigError, EpisodeStateError

_PROGRESS_EVERY = 1000
"""SQLite VM instructions between deadline checks: ~tens of microseconds, so a statement
overshoots its limit by far less than a millisecond while the check itself stays cheap."""

_MAX_VALUE_BYTES = 16 * 1024 * 1024
"""Largest string or blob a statement may build (SQLite's own limit is 1 GB): keeps
``randomblob(1e9)`` and friends from eating the host's memory."""

_ALLOWED_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "collation_list", "function_list", "integrity_check",
    "quick_check", "database_list",
})
"""Read-only introspection pragmas the agent may run; every other pragma is refused."""

_AGENT_DENIED = {
    sqlite3.SQLITE_ATTACH: "ATTACH is not allowed: the episode has exactly one database",
    sqlite3.SQLITE_DETACH: "DETACH is not allowed: the episode has exactly one database",
}

TIMEOUT_MESSAGE = "Query execution was interrupted: it ran past the time limit of {limit:g} s"


class SQLiteEpisode(EpisodeDatabase):
    """One episode's private in-memory database (see :class:`SQLiteBackend`)."""

    def __init__(self, backend: SQLiteBackend, name: str, tables: Sequence[TableData]) -> None:
        self.name = name
        self._backend = backend
        self._deadline = float("inf")
        self._agent_mode = False
        # isolation_level=None: autocommit, as the mysql backend runs the agent's statements;
        # the agent may still BEGIN / COMMIT explicitly.
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            ":memory:", isolation_level=None, check_same_thread=False
        )
        conn = self._conn
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        register_sqlite_functions(conn.create_function, conn.create_aggregate)
        conn.set_progress_handler(self._progress, _PROGRESS_EVERY)
        conn.set_authorizer(self._authorize)
        try:
            for table in tables:
                create, insert = table_statements(table, quote_sqlite_identifier, "?")
                conn.execute(create)
                if table.rows:
                    conn.executemany(insert, table.rows)
        except sqlite3.Error as exc:
            self.close()
            raise ConfigError(f"cannot create the episode's tables in SQLite: {exc}") from exc

    # The authorizer and the progress handler are called by SQLite for every statement on
    # this connection; the admin path switches the restrictions off while it runs.
    def _authorize(self, action: int, arg1: str | None, arg2: str | None, dbname: str | None,
                   source: str | None) -> int:
        if not self._agent_mode:
            return sqlite3.SQLITE_OK
        if action in _AGENT_DENIED:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in _ALLOWED_PRAGMAS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() == "database_list" and arg2:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in {"load_extension", "agentunit_sorted_concat"}:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise EpisodeStateError(f"episode database {self.name!r} is closed; open a new episode")
        return self._conn

    def _run(self, sql: str, timeout: float, max_rows: int, agent: bool) -> QueryResult:
        check_limits(timeout, max_rows)
        conn = self._connection()
        start = time.monotonic()
        if not sql.strip():
            return QueryResult(error="Query was empty", duration_s=0.0)  # MySQL's wording; SQLite runs nothing
        self._deadline = start + timeout
        self._agent_mode = agent
        kept: list[tuple[Any, ...]] = []
        total = 0
        truncated = False
        columns: tuple[str, ...] = ()
        try:
            cursor = conn.execute(sql)
            if cursor.description is not None:
                columns = tuple(d[0] for d in cursor.description)
                kept, total = fetch_capped(cursor, max_rows)
                truncated = total > len(kept)
            else:
                total = max(cursor.rowcount, 0)
            cursor.close()
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted" and time.monotonic() >= self._deadline:
                return QueryResult(columns=columns, error=TIMEOUT_MESSAGE.format(limit=timeout), timed_out=True,
                                   duration_s=time.monotonic() - start)
            return self._error(exc, start)
        except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError) as exc:
            # sqlite3.Warning: "You can only execute one statement at a time."; OverflowError:
            # an integer literal too big for SQLite; ValueError: a NUL in the text.
            return self._error(exc, start)
        finally:
            self._deadline = float("inf")
            self._agent_mode = False
        return QueryResult(columns=columns, rows=tuple(kept), rowcount=total, truncated=truncated,
                           duration_s=time.monotonic() - start)

    @staticmethod
    def _error(exc: BaseException, start: float) -> QueryResult:
        message = str(exc)
        if message in ("not authorized", "authorization denied"):
            message = "not authorized: the statement reaches outside this episode's database"
        return QueryResult(error=message, duration_s=time.monotonic() - start)

    def execute(self, sql: str, *, timeout: float = 10.0, max_rows: int = 1000) -> QueryResult:
        """Run one agent statement in this episode's database.

        Args:
            sql: one SQL statement (several in one string are refused, as on MySQL).
            timeout: seconds before the statement is interrupted (a ``timed_out`` result).
            max_rows: rows kept in the result; ``truncated`` tells when there were more.

        Returns:
            The result; SQL errors, refused statements and timeouts are results, not exceptions.

        Raises:
            EpisodeStateError: the episode is closed.
            ConfigError: ``timeout`` <= 0 or ``max_rows`` < 0.
        """
        return self._run(sql, timeout, max_rows, agent=True)

    def admin_query(self, sql: str, *, timeout: float = 30.0, max_rows: int = 100_000) -> QueryResult:
        """Run SQL with full rights on this episode's database (grading, trap checks).

        Raises:
            EpisodeStateError: the episode is closed.
        """
        return self._run(sql, timeout, max_rows, agent=False)

    def table_hash(self, table: str, columns: Sequence[str]) -> str:
        """AgentBench's table hash (see :mod:`agentunit_gym.backends.sql.hashing`).

        Returns:
            The hex digest; ``""`` for a table without rows (MySQL's NULL there); a string
            starting with ``"error:"`` (never a valid digest) when the table or a column no
            longer exists, e.g. because the agent dropped it.

        Raises:
            EpisodeStateError: the episode is closed.
            BackendError: the hash query timed out.
        """
        result = self.admin_query(sqlite_table_hash_sql(table, columns), timeout=HASH_TIMEOUT_S, max_rows=1)
        return hash_from_result(result, table, self.name)

    def close(self) -> None:
        """Drop the database (close its connection). Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            self._backend._forget(self)

    @property
    def closed(self) -> bool:
        return self._conn is None


class SQLiteBackend(SQLBackend):
    """SQLite in process: the embedded default, needing no daemon.

    Example:
        >>> from agentunit_gym.backends.sql.base import Column, TableData
        >>> backend = SQLiteBackend()
        >>> db = backend.open_episode([TableData("t", (Column("x"),), (("1",),))])
        >>> db.execute("SELECT x FROM t").rows
        (('1',),)
        >>> backend.close()
    """

    kind = "sqlite"

    def __init__(self) -> None:
        self._episodes: dict[int, SQLiteEpisode] = {}
        self._closed = False

    def open_episode(self, tables: Sequence[TableData], *, database: str | None = None) -> SQLiteEpisode:
        """Create a fresh private database holding ``tables``.

        Args:
            tables: the tables to create and fill.
            database: a name for the episode (SQLite has one unnamed database per
                connection, so this only names the episode); else a unique name.

        Raises:
            ConfigError: the table spec is invalid.
            EpisodeStateError: the backend is closed.
        """
        if self._closed:
            raise EpisodeStateError("this SQLiteBackend is closed; create a new one")
        check_tables(tables)
        episode = SQLiteEpisode(self, database or f"ep_{uuid.uuid4().hex[:12]}", tables)
        self._episodes[id(episode)] = episode
        return episode

    def _forget(self, episode: SQLiteEpisode) -> None:
        self._episodes.pop(id(episode), None)

    @property
    def open_episodes(self) -> int:
        """How many episode databases are open."""
        return len(self._episodes)

    def close(self) -> None:
        """Drop every open episode database. Idempotent."""
        self._closed = True
        for episode in list(self._episodes.values()):
            episode.close()
