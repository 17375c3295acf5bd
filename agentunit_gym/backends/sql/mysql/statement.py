"""One statement under a time limit: the server's own limit, a ``KILL QUERY`` watchdog, a read deadline.

A statement time limit is enforced by the server (``max_statement_time`` on MariaDB,
``max_execution_time`` on MySQL, set before every statement so the agent cannot lift it),
backed by ``KILL QUERY`` from a second admin connection shortly after the limit, and by a
client read timeout after that.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from agentunit_gym.backends.sql.base import QueryResult, check_limits, fetch_capped
from agentunit_gym.backends.sql.mysql.connection import (
    ER_QUERY_INTERRUPTED,
    ER_QUERY_TIMEOUT,
    ER_STATEMENT_TIMEOUT,
    ConnectParams,
    close_quietly,
    connect,
    error_code,
    format_error,
    is_connection_error,
    load_pymysql,
)
from agentunit_gym.errors import BackendUnavailableError

KILL_GRACE_S = 0.5
"""How long past its limit a statement may run before we send ``KILL QUERY`` ourselves
(the server's own limit normally ends it first)."""
READ_GRACE_S = 5.0
"""How long after ``KILL QUERY`` we wait for the server to answer before giving up on the
connection (the server is then hung or gone: an infrastructure failure)."""


class Session:
    """A connection plus the bookkeeping to run one statement on it with a time limit."""

    def __init__(self, conn: Any, flavor: str) -> None:
        self.conn = conn
        self.flavor = flavor
        self.thread_id: int = conn.thread_id()


def run_statement(session: Session, sql: str, timeout: float, max_rows: int,
                   killer: Killer) -> QueryResult:
    """Run ``sql`` on ``session`` with a server-side time limit, a KILL QUERY backstop and a
    client read deadline. SQL errors and timeouts come back as results.

    Raises:
        pymysql.err.MySQLError: the connection failed (the caller turns it into a typed error).
    """
    check_limits(timeout, max_rows)
    pymysql = load_pymysql()
    conn = session.conn
    # Set before every statement: the agent may have changed its session's limit.
    limit = (f"SET SESSION max_statement_time = {timeout:.3f}" if session.flavor == "mariadb"
             else f"SET SESSION max_execution_time = {max(1, int(timeout * 1000))}")
    with conn.cursor() as cur:
        cur.execute(limit)
    # pymysql reads the timeout attribute before each socket read, so it can change per call.
    conn._read_timeout = timeout + KILL_GRACE_S + READ_GRACE_S
    watchdog = killer.arm(session.thread_id, timeout + KILL_GRACE_S)
    start = time.monotonic()
    kept: list[tuple[Any, ...]] = []
    total = 0
    truncated = False
    columns: tuple[str, ...] = ()
    error: str | None = None
    errno: int | None = None
    timed_out = False
    try:
        # Unbuffered: rows are counted as they stream in and only max_rows are kept, so a
        # huge result costs time (bounded by the limit), never memory.
        cur = pymysql.cursors.SSCursor(conn)
        try:
            cur.execute(sql)
            if cur.description is not None:
                columns = tuple(d[0] for d in cur.description)
                kept, total = fetch_capped(cur, max_rows)
                truncated = total > len(kept)
            else:
                total = max(cur.rowcount, 0)
        finally:
            if conn.open:
                cur.close()
    except pymysql.err.MySQLError as exc:
        if is_connection_error(exc):
            raise
        code = errno = error_code(exc)
        error = format_error(exc)
        timed_out = code in (ER_STATEMENT_TIMEOUT, ER_QUERY_TIMEOUT) or (
            code == ER_QUERY_INTERRUPTED and watchdog.fired
        )
        if timed_out:
            error = f"{error} (time limit {timeout:g} s)"
        # Rows streamed before the error are dropped, as SQLite (and a buffered client) would.
        kept, total, truncated = [], 0, False
    finally:
        watchdog.disarm()
    duration = time.monotonic() - start
    if watchdog.fired and conn.open:
        # A KILL QUERY that lands just as the statement ends must not hit the next one:
        # absorb it with a no-op now.
        absorb_kill(conn)
    if session.flavor == "mysql" and not timed_out and duration >= timeout:
        # MySQL ends a SLEEP() cut by max_execution_time with the result 1, not an error:
        # a statement that ran up to the limit was stopped by it.
        timed_out = True
    return QueryResult(columns=columns, rows=tuple(kept), rowcount=total, truncated=truncated,
                       error=error, timed_out=timed_out, duration_s=duration,
                       extra={} if errno is None else {"errno": errno})


def absorb_kill(conn: Any) -> None:
    pymysql = load_pymysql()
    for _ in range(2):
        try:
            with conn.cursor() as cur:
                cur.execute("DO 0")
            return
        except pymysql.err.MySQLError as exc:
            if is_connection_error(exc) or error_code(exc) != ER_QUERY_INTERRUPTED:
                return


class Watchdog:
    def __init__(self, timer: threading.Timer | None) -> None:
        self._timer = timer
        self.fired = False

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            # If the timer is running its KILL right now, wait for it (bounded by its own
            # connect and read timeouts) so the kill cannot land on a later statement.
            self._timer.join(timeout=10.0)


class Killer:
    """Sends ``KILL QUERY`` from its own admin connection when a statement overruns."""

    def __init__(self, params: ConnectParams) -> None:
        self._params = params
        self._conn: Any = None
        self._lock = threading.Lock()

    def arm(self, thread_id: int, after: float) -> Watchdog:
        watchdog = Watchdog(None)

        def fire() -> None:
            watchdog.fired = True
            self.kill(thread_id, query_only=True)

        timer = threading.Timer(after, fire)
        timer.daemon = True  # never keeps the interpreter alive
        watchdog._timer = timer
        timer.start()
        return watchdog

    def kill(self, thread_id: int, *, query_only: bool) -> bool:
        """KILL [QUERY] ``thread_id``; False when it could not be sent (server gone)."""
        pymysql = load_pymysql()
        with self._lock:
            for _ in range(2):  # one reconnect if our connection went stale
                try:
                    if self._conn is None or not self._conn.open:
                        self._conn = connect(self._params, connect_timeout=3.0, read_timeout=5.0)
                    with self._conn.cursor() as cur:
                        cur.execute(f"KILL {'QUERY ' if query_only else ''}{int(thread_id)}")
                    return True
                except BackendUnavailableError:
                    return False
                except pymysql.err.MySQLError as exc:
                    if not is_connection_error(exc):
                        return False  # unknown thread: it ended meanwhile
                    self._close()
            return False

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def close(self) -> None:
        with self._lock:
            self._close()
