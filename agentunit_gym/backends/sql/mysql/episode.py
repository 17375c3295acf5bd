"""One episode's database, reached as the episode's own user; grading runs on the admin side."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol

from agentunit_gym.backends.sql.base import EpisodeDatabase, QueryResult
from agentunit_gym.backends.sql.hashing import hash_from_result, mysql_table_hash_sql
from agentunit_gym.backends.sql.mysql.accounts import restore_password_sql
from agentunit_gym.backends.sql.mysql.connection import (
    ER_CONNECTION_KILLED,
    ConnectParams,
    close_quietly,
    format_error,
    is_connection_error,
    load_pymysql,
)
from agentunit_gym.backends.sql.mysql.statement import KILL_GRACE_S, READ_GRACE_S, Killer, Session, run_statement
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, EpisodeStateError

logger = logging.getLogger("agentunit_gym")

ADMIN_TIMEOUT_S = 5.0
"""Time limit of the admin statement that restores an account's password."""
_KILL = re.compile(r"\bkill\b", re.IGNORECASE)
"""A statement that mentions KILL and loses its connection killed its own session."""
_SERVER_STATUS_IN_TRANS = 1
_SERVER_STATUS_AUTOCOMMIT = 2
"""Status flags of the server's OK packets (``SERVER_STATUS_IN_TRANS``, ``..._AUTOCOMMIT``)."""


class EpisodeHost(Protocol):
    """What an episode needs from its backend (:class:`~.backend.MySQLBackend` provides it)."""

    flavor: str
    killer: Killer

    def server_alive(self) -> bool: ...

    def describe_server(self) -> str: ...

    def mark_dead(self) -> None: ...

    def agent_connection(self, params: ConnectParams, database: str) -> Any:
        """A new connection as the episode's user, set up as MySQL 8's sessions are."""

    def admin_run(self, episode: MySQLEpisode, sql: str, timeout: float, max_rows: int) -> QueryResult:
        """``sql`` on the admin connection, the episode's database the default one."""

    def hash_run(self, episode: MySQLEpisode, sql: str) -> QueryResult:
        """The table hash query (qualified names) on the session set up for it."""

    def drop_episode(self, episode: MySQLEpisode, conn: Any) -> None:
        """Forget the episode; drop its user and database, or renew them for another episode
        (now or on the background worker). ``conn`` is the agent's connection (None if lost)."""


def needs_commit(conn: Any) -> bool:
    """Whether the agent's last statement left a transaction to commit.

    The server's status flags come with every OK packet; we read them after our own ``SET``
    before the statement, and again after a statement that ends with an OK packet. A statement
    that returns rows cannot open a transaction under autocommit, so the flags are current
    whenever autocommit is on.
    """
    status = int(conn.server_status or 0)
    return bool(status & _SERVER_STATUS_IN_TRANS or not status & _SERVER_STATUS_AUTOCOMMIT)


class MySQLEpisode(EpisodeDatabase):
    """One episode's database on the backend's server, reached as the episode's own user."""

    def __init__(self, backend: EpisodeHost, name: str, user: str, session: Session, generation: int,
                 params: ConnectParams) -> None:
        self.name = name
        self.user = user
        self.params = params
        """How to log in as the episode's user."""
        self.home: str | None = None
        """The account's own database when the account may serve another episode once renewed
        (:func:`.accounts.renew_account`); None: it is dropped with this episode."""
        self.last_timeout: float | None = None
        """The time limit of the agent's last statement (a renewed account's session gets it)."""
        self._backend = backend
        self._session: Session | None = session
        self._generation = generation
        self._closed = False
        self._lost: str | None = None

    @property
    def connection_id(self) -> int:
        """The server's id of the agent's connection (for KILL in tests and admin tools)."""
        if self._session is None:
            raise EpisodeStateError(f"episode database {self.name!r} has no open connection")
        return self._session.thread_id

    @property
    def closed(self) -> bool:
        return self._closed

    def execute(self, sql: str, *, timeout: float = 10.0, max_rows: int = 1000) -> QueryResult:
        """Run one agent statement as the episode's user.

        Args:
            sql: one SQL statement (several in one string are a syntax error, as in AgentBench).
            timeout: the statement's time limit in seconds (a ``timed_out`` result past it).
            max_rows: rows kept in the result; ``truncated`` tells when there were more.

        Returns:
            The result; SQL errors, permission errors and timeouts are results.

        Raises:
            EpisodeStateError: the episode is closed.
            BackendError: the connection dropped or the server died; open a new episode.
            BackendTimeoutError: the server stopped answering even after ``KILL QUERY``.
        """
        if self._closed:
            raise EpisodeStateError(f"episode database {self.name!r} is closed; open a new episode")
        if self._session is None:
            raise BackendError(f"episode database {self.name!r} lost its connection earlier ({self._lost}); "
                               "open a new episode (env.reset()) to continue")
        pymysql = load_pymysql()
        self.last_timeout = timeout
        try:
            result = run_statement(self._session, sql, timeout, max_rows, self._backend.killer)
            if result.extra.get("errno") != ER_CONNECTION_KILLED and needs_commit(self._session.conn):
                # AgentBench commits after every statement of the agent (autocommit off, a
                # commit after each): an explicit START TRANSACTION ends at once, and grading
                # sees every change, as on its server. Only when a transaction is open: a
                # COMMIT outside one does nothing but cost a round trip.
                self._session.conn.commit()
        except pymysql.err.MySQLError as exc:
            if not is_connection_error(exc):
                # Only our own bookkeeping statements (the time limit, the commit) can fail this way.
                raise BackendError(f"setting up a statement of episode {self.name!r} failed: {exc}") from exc
            if _KILL.search(sql) and self._backend.server_alive():
                return self._reconnect_after_self_kill(format_error(exc))
            raise self._lose(exc, timeout) from exc
        if result.extra.get("errno") == ER_CONNECTION_KILLED:
            return self._reconnect_after_self_kill(result.error or "")
        return result

    def _reconnect_after_self_kill(self, error: str) -> QueryResult:
        """The agent's own statement ended its connection (``KILL CONNECTION_ID()``): an agent
        action, so an error result and a fresh connection, not an infrastructure failure."""
        if self._session is not None:
            close_quietly(self._session.conn)
        self._session = None
        try:
            self._session = Session(self._login(), self._backend.flavor)
        except BackendUnavailableError as again:
            self._lost = str(again)
            raise BackendError(f"episode {self.name!r} cannot reconnect after its connection was killed: "
                               f"{again}") from again
        return QueryResult(error=f"{error} (the statement ended this session's own connection; a new "
                                 "connection was opened: session variables and open transactions are gone)")

    def _login(self) -> Any:
        """A new connection as the episode's user. The agent may have set its own password
        (``SET PASSWORD``, which any user may do to itself): then the login fails, the
        admin gives the account its password back, and the login is tried once more.

        Raises:
            BackendUnavailableError: the login failed again.
        """
        try:
            return self._backend.agent_connection(self.params, self.name)
        except BackendUnavailableError:
            restored = self._backend.admin_run(self, restore_password_sql(self.user, self.params.password),
                                               ADMIN_TIMEOUT_S, 1)
            if restored.error is not None:
                logger.warning("could not restore the password of episode account %s: %s", self.user, restored.error)
            return self._backend.agent_connection(self.params, self.name)

    def _lose(self, exc: BaseException, timeout: float) -> Exception:
        """Record a dropped agent connection and build the typed error to raise."""
        session, self._session = self._session, None
        if session is not None:
            close_quietly(session.conn)
        self._lost = str(exc)
        alive = self._backend.server_alive()
        if not alive:
            self._backend.mark_dead()
            return BackendError(
                f"{self._backend.describe_server()} is gone ({exc}). Episode {self.name!r} cannot continue; "
                "the next open_episode (env.reset()) starts a new server."
            )
        if "timed out" in str(exc):
            return BackendTimeoutError(
                f"the MySQL server did not answer within {timeout + KILL_GRACE_S + READ_GRACE_S:g} s even after "
                f"KILL QUERY; the connection of episode {self.name!r} was closed. Open a new episode."
            )
        return BackendError(
            f"the connection of episode {self.name!r} dropped ({exc}); the server still runs. "
            "Open a new episode (env.reset()) to continue."
        )

    def admin_query(self, sql: str, *, timeout: float = 30.0, max_rows: int = 100_000) -> QueryResult:
        """Run SQL with full rights, with this episode's database as the default one.

        Raises:
            EpisodeStateError: the episode is closed.
            BackendError: the admin connection failed.
        """
        if self._closed:
            raise EpisodeStateError(f"episode database {self.name!r} is closed; open a new episode")
        return self._backend.admin_run(self, sql, timeout, max_rows)

    def table_hash(self, table: str, columns: Sequence[str]) -> str:
        """AgentBench's table hash, computed on the server (see :mod:`.hashing`).

        Returns:
            The hex digest; ``""`` for a table without rows (the server's NULL); a string
            starting with ``"error:"`` (never a valid digest) when the table or a column
            no longer exists, e.g. because the agent dropped it.

        Raises:
            EpisodeStateError: the episode is closed.
            BackendError: the server failed or the hash query timed out.
        """
        sql = mysql_table_hash_sql(self.name, table, columns)
        if self._closed:
            raise EpisodeStateError(f"episode database {self.name!r} is closed; open a new episode")
        return hash_from_result(self._backend.hash_run(self, sql), table, self.name)

    def close(self) -> None:
        """Hand the agent's connection back to the backend, which closes it and drops the
        episode's user and database, or renews them for a later episode. Idempotent."""
        if self._closed:
            return
        self._closed = True
        session, self._session = self._session, None
        self._backend.drop_episode(self, session.conn if session is not None else None)
