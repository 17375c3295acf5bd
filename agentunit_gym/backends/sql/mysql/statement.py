"""One statement under a time limit: the server's own limit, a ``KILL QUERY`` watchdog, a read deadline.

A statement time limit is enforced by the server (``max_statement_time`` on MariaDB,
``max_execution_time`` on MySQL, set before every statement so the agent cannot lift it,
unless only plain queries and data changes ran on the session since it was set),
backed by ``KILL QUERY`` from a second admin connection shortly after the limit, and by a
client read timeout after that.
"""

from __future__ import annotations

import re
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
FIRE_WAIT_S = 10.0
"""Longest wait for a ``KILL QUERY`` being sent (its own connect and read timeouts bound it)."""


KEEPS_LIMIT = re.compile(r"\s*(?:select|insert|update|delete|replace|show|describe|desc|explain)\b", re.IGNORECASE)
"""Statements that cannot change a session variable, as long as the database holds no routine
or trigger of the agent's (which only a statement of another kind can create)."""


def limit_statement(flavor: str, timeout: float) -> str:
    """The ``SET`` of a session's statement time limit."""
    return (f"SET SESSION max_statement_time = {timeout:.3f}" if flavor == "mariadb"
            else f"SET SESSION max_execution_time = {max(1, int(timeout * 1000))}")


class Session:
    """A connection plus the bookkeeping to run one statement on it with a time limit."""

    def __init__(self, conn: Any, flavor: str, limit: float | None = None) -> None:
        self.conn = conn
        self.flavor = flavor
        self.thread_id: int = conn.thread_id()
        self.limit = limit
        """The time limit known to be set on the session; None: unknown, set it first."""
        self.plain = True
        """Whether only :data:`KEEPS_LIMIT` statements ran (none could have changed the limit)."""


def run_statement(session: Session, sql: str, timeout: float, max_rows: int,
                   killer: Killer, settings: str = "", *, set_limit: bool = True) -> QueryResult:
    """Run ``sql`` on ``session`` with a server-side time limit, a KILL QUERY backstop and a
    client read deadline. SQL errors and timeouts come back as results.

    ``settings`` (``"group_concat_max_len = 1024, ..."``) are set in the same ``SET`` as the
    limit: one round trip for both. ``set_limit=False`` skips that ``SET`` for a session of
    ours whose limit was set once and that runs nothing else (the watchdog still applies).

    Raises:
        pymysql.err.MySQLError: the connection failed (the caller turns it into a typed error).
    """
    check_limits(timeout, max_rows)
    pymysql = load_pymysql()
    conn = session.conn
    # Set before every statement unless it is known to hold: the agent may have changed its
    # session's limit with any statement that is not a plain query or data change.
    if not KEEPS_LIMIT.match(sql):
        session.plain = False
    if set_limit and (settings or session.limit != timeout):
        limit = limit_statement(session.flavor, timeout)
        with conn.cursor() as cur:
            cur.execute(f"{limit}, {settings}" if settings else limit)
        session.limit = timeout
    if not session.plain:
        session.limit = None  # this statement may change it: set it again before the next
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
    """One armed statement: :class:`Killer` sends ``KILL QUERY`` for it at its deadline unless disarmed."""

    def __init__(self, killer: Killer, thread_id: int, deadline: float) -> None:
        self._killer = killer
        self.thread_id = thread_id
        self.deadline = deadline
        self.fired = False

    def disarm(self) -> None:
        """Cancel the kill; if it is being sent right now, wait for it (bounded) so it cannot
        land on a later statement."""
        self._killer.disarm(self)


class Killer:
    """Sends ``KILL QUERY`` from its own admin connection when a statement overruns.

    One long-lived thread waits for the earliest deadline of the armed statements. Arming and
    disarming only touch a set under a lock: no thread is started or joined per statement
    (a ``threading.Timer`` each time cost two thread switches a statement, 0.1-1 ms on a busy
    2-core machine). The thread starts on the first arm and stops in :meth:`close`.
    """

    def __init__(self, params: ConnectParams) -> None:
        self._params = params
        self._conn: Any = None
        self._lock = threading.Lock()  # guards the kill connection
        self._cond = threading.Condition()  # guards the fields below
        self._armed: set[Watchdog] = set()
        self._firing: Watchdog | None = None
        self._wakes_at: float | None = None  # when the thread wakes up next; None: waits for an arm
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, thread_id: int, after: float) -> Watchdog:
        """Kill ``thread_id``'s statement ``after`` seconds from now unless disarmed first."""
        watchdog = Watchdog(self, thread_id, time.monotonic() + after)
        with self._cond:
            self._armed.add(watchdog)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="agentunit-gym-mysql-killer", daemon=True)
                self._thread.start()
            elif self._wakes_at is None or watchdog.deadline < self._wakes_at:
                self._cond.notify()  # the thread sleeps past this deadline: wake it to recompute
        return watchdog

    def disarm(self, watchdog: Watchdog) -> None:
        deadline = time.monotonic() + FIRE_WAIT_S
        with self._cond:
            self._armed.discard(watchdog)
            while self._firing is watchdog:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                due = min(self._armed, key=lambda w: w.deadline, default=None)
                now = time.monotonic()
                if due is None or due.deadline > now:
                    self._wakes_at = None if due is None else due.deadline
                    self._cond.wait(None if due is None else due.deadline - now)
                    continue
                self._armed.discard(due)
                due.fired = True
                self._firing = due
                self._cond.release()
                try:
                    self.kill(due.thread_id, query_only=True)
                finally:
                    self._cond.acquire()
                    self._firing = None
                    self._cond.notify_all()

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
        """Stop the thread (bounded wait) and close the kill connection. Idempotent."""
        with self._cond:
            self._stopped = True
            self._armed.clear()
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=FIRE_WAIT_S)
        with self._lock:
            self._close()
