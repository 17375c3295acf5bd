"""The backend: one server reused across episodes, a database and a user per episode, recovery.

Each episode gets its own database, created from the task's tables and dropped after, and
its own user that holds privileges on that database only; the agent's statements run on a
connection of that user (:mod:`.episode`). The user, an empty database and the connection are
made ahead, and ended episodes renewed or dropped behind, by a worker (:mod:`.spares`): an
episode's critical path holds only what depends on its task.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from agentunit_gym.backends.sql.base import QueryResult, SQLBackend, TableData
from agentunit_gym.backends.sql.hashing import (
    HASH_TIMEOUT_S,
    check_tables,
    quote_mysql_identifier,
)
from agentunit_gym.backends.sql.mysql.accounts import (
    ADMIN_LOCK_WAIT_S,
    Account,
    agent_connection,
    create_account,
    drop_account,
    undo_account,
    unique_database_name,
)
from agentunit_gym.backends.sql.mysql.connection import (
    ER_DB_CREATE_EXISTS,
    ConnectParams,
    close_quietly,
    error_code,
    format_error,
    is_connection_error,
    load_pymysql,
    parse_dsn,
    run_batch,
)
from agentunit_gym.backends.sql.mysql.dialect import (
    MARIADB_SQL_MODE,
    Dialect,
)
from agentunit_gym.backends.sql.mysql.episode import MySQLEpisode
from agentunit_gym.backends.sql.mysql.loading import (
    batches,
    check_database_name,
    load_statements,
    move_grant_statements,
)
from agentunit_gym.backends.sql.mysql.server import ContainerServer, DsnServer, Server
from agentunit_gym.backends.sql.mysql.sessions import AdminSessions, open_sessions
from agentunit_gym.backends.sql.mysql.spares import SparePool
from agentunit_gym.backends.sql.mysql.statement import Killer, Session, run_statement
from agentunit_gym.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
)

logger = logging.getLogger("agentunit_gym")

__all__ = ["ADMIN_LOCK_WAIT_S", "MySQLBackend"]


class MySQLBackend(SQLBackend):
    """A MySQL-compatible server (our MariaDB container, an image you name, or a DSN).

    Example (run by tests/test_doctests.py against the MariaDB container; an existing server
    instead: ``MySQLBackend(dsn="mysql://root:pw@127.0.0.1:3306/")``):
        >>> from agentunit_gym.backends.sql.base import Column, TableData
        >>> backend = MySQLBackend()                       # MariaDB container
        >>> db = backend.open_episode([TableData("t", (Column("x"),), (("1",),))])
        >>> db.execute("SELECT x FROM t").rows
        (('1',),)
        >>> backend.close()

    The backend is meant for one thread (one env); each episode's statements run one at a time.
    A worker thread of its own makes the next episode's account ahead, renews or drops ended
    ones (``spares=0``: accounts made and dropped on the caller's thread, none renewed).
    """

    kind = "mysql"

    def __init__(self, *, dsn: str | None = None, image: str | None = None, start_timeout: float | None = None,
                 memory_limit: str = "1g", tmpfs_size: str = "1g", spares: int = 2) -> None:
        """Start (or reach) the server and check it answers.

        Args:
            dsn: an existing server, ``mysql://user:pass@host:port/``; its user needs the
                rights to create and drop databases and users and to grant on them.
            image: run this image instead of the project's MariaDB (e.g. ``"mysql:8"``,
                which must already be on the daemon); ignored with ``dsn``.
            start_timeout: deadline for the container's server to accept logins (default
                60 s for ours, 180 s for an official image, which initialises on start).
            memory_limit: the container's memory limit.
            tmpfs_size: size of the container's tmpfs datadir.
            spares: episode accounts (user, empty database, connection) kept ready by a
                worker thread, which also renews ended episodes' ones (or drops them);
                taken ones are replaced when an episode closes. 0: made and dropped inside
                ``open_episode`` and ``close``.

        Raises:
            BackendUnavailableError: no Docker daemon, the image is missing, or the server
                refuses the login. BackendTimeoutError: the server was not ready in time.
            ImageBuildError: the project's image could not be built.
            ConfigError: ``dsn`` and ``image`` together, or a negative ``spares``.
        """
        if dsn is not None and image is not None:
            raise ConfigError("pass either dsn (an existing server) or image (a container to start), not both")
        if spares < 0:
            raise ConfigError(f"spares must be 0 (none) or more, got {spares}")
        self._server: Server = (DsnServer(parse_dsn(dsn)) if dsn is not None
                                else ContainerServer(image, start_timeout, memory_limit, tmpfs_size))
        self._lock = threading.RLock()
        self._episodes: dict[str, MySQLEpisode] = {}
        self._closed = False
        self._dead = False
        self._generation = 0
        self._sessions: AdminSessions | None = None
        self._admin_db: str | None = None
        self._spares = spares
        self._pool: SparePool | None = None
        self.flavor = "mariadb"
        self.server_version = ""
        self.dialect = Dialect(MARIADB_SQL_MODE, None)
        self._params = self._server.start()
        self.killer = Killer(self._params)
        try:
            self._connect_admin()
        except BaseException:
            self.killer.close()
            self._server.stop()
            raise
        self._start_pool()

    # -- server lifecycle -------------------------------------------------------------

    def _connect_admin(self) -> None:
        self._close_admin()
        self._sessions = open_sessions(self._params)
        self._admin_db = None
        self.server_version = self._sessions.server_version
        self.flavor = self._sessions.flavor
        self.dialect = self._sessions.dialect

    def _start_pool(self) -> None:
        if self._spares:
            self._pool = SparePool(self._params, self.dialect, self._spares, self._server.describe, self.flavor)

    def _stop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def agent_connection(self, params: ConnectParams, database: str) -> Any:
        """A new connection for an episode's user, set up as MySQL 8's sessions are (:class:`Dialect`).

        Raises:
            BackendUnavailableError: the login failed, or the server refused the settings.
        """
        return agent_connection(params, database, self.dialect)

    def server_alive(self) -> bool:
        """Whether the server answers (a fresh login, or the container's state)."""
        return self._server.alive()

    def describe_server(self) -> str:
        return self._server.describe()

    def mark_dead(self) -> None:
        """The server went away: the next ``open_episode`` checks it and starts a new one."""
        self._dead = True

    def _recover(self) -> None:
        """Make sure the server and the admin connections work, restarting what died.

        The check is a ping of the loader, skipped when it answered less than
        :data:`~.sessions.PING_IDLE_S` ago (back-to-back episodes): a connection lost within that window
        fails this ``open_episode`` with a :class:`BackendError`, and the next one recovers.
        """
        if not self._dead and self._sessions is not None and (self._sessions.fresh() or self._sessions.ping()):
            return
        if self._server.alive():
            self._dead = False
            self._connect_admin()
            return
        if not self._server.restartable:
            raise BackendUnavailableError(f"{self._server.describe()} does not answer; start it again and retry.")
        logger.warning("%s died; starting a new one", self._server.describe())
        # Episodes of the dead server have nothing left to drop.
        for episode in list(self._episodes.values()):
            episode._generation = -1
        self._episodes.clear()
        self._close_admin()
        self._stop_pool()  # its spares died with the server
        self.killer.close()
        self._server.stop()
        self._params = self._server.start()
        self.killer = Killer(self._params)
        self._generation += 1
        self._dead = False
        self._connect_admin()
        self._start_pool()

    def _close_admin(self) -> None:
        sessions, self._sessions = self._sessions, None
        if sessions is not None:
            sessions.close()

    @property
    def container_name(self) -> str | None:
        """The server container's name (None for a DSN server)."""
        return self._server.name if isinstance(self._server, ContainerServer) else None

    @property
    def open_episodes(self) -> int:
        """How many episode databases are open."""
        return len(self._episodes)

    def admin_connect_params(self) -> ConnectParams:
        """Connect parameters of the admin account (for tests and inspection tools)."""
        return self._params

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the worker has dropped the ended episodes and made the spares.

        ``close`` of an episode returns once the agent's connection is closed; its user and
        database go a moment later. Call this before counting databases on the server.

        Raises:
            BackendTimeoutError: the worker was still busy after ``timeout`` seconds.
        """
        pool = self._pool
        if pool is not None and not pool.settle(timeout):
            raise BackendTimeoutError(f"the episode worker of {self._server.describe()} was still busy after "
                                      f"{timeout:g} s")

    def spare_names(self) -> tuple[list[str], list[str]]:
        """The databases and user names of the spares ready now (see :meth:`settle`)."""
        return self._pool.spare_names() if self._pool is not None else ([], [])

    # -- episodes ---------------------------------------------------------------------

    def open_episode(self, tables: Sequence[TableData], *, database: str | None = None) -> MySQLEpisode:
        """Create a database holding ``tables`` and a user that can reach only it.

        Args:
            tables: the tables to create (columns in order, types as given) and fill.
            database: the database's name (e.g. AgentBench's table name); else a unique name.

        Returns:
            The episode, connected as its own user with the database as default.

        Raises:
            ConfigError: invalid tables or name, or the server rejected the table spec.
            BackendError: a database of that name already exists on the server.
            BackendUnavailableError: the server cannot be reached (or restarted).
            EpisodeStateError: the backend is closed.
        """
        if self._closed:
            raise EpisodeStateError("this MySQLBackend is closed; create a new one")
        check_tables(tables)
        if database is not None:
            check_database_name(database)
        pymysql = load_pymysql()
        with self._lock:
            self._recover()
            sessions = self._require_sessions()
            account = self._pool.take() if self._pool is not None else None
            if database is not None and self._pool is not None:
                self._pool.wait_dropped(database)  # the same name, reopened right after its episode closed
            name = database if database is not None else (account.database if account else unique_database_name())
            spare_database = account.database if account is not None else None
            created_db = False
            try:
                with self._loading():
                    # One round trip for the lot when it is small (as it usually is): the
                    # database unless the spare brought it, the tables and rows, and for a
                    # named database the spare user's grant moved onto it.
                    statements = [] if spare_database == name else [
                        f"CREATE DATABASE {quote_mysql_identifier(name)} {self.dialect.database_options}"]
                    statements += load_statements(sessions.loader.escape, name, tables)
                    if account is not None and spare_database != name:
                        statements += move_grant_statements(account.account, account.database, name)
                    try:
                        for batch in batches(statements):
                            run_batch(sessions.loader, batch)
                    except pymysql.err.MySQLError as exc:
                        if spare_database != name and error_code(exc) == ER_DB_CREATE_EXISTS:
                            raise BackendError(
                                f"a database named {name!r} already exists on {self._server.describe()}: another "
                                "episode uses it, or an earlier run left it behind. Close that episode, drop the "
                                "database, or let the backend pick a unique name."
                            ) from exc
                        created_db = spare_database != name  # as far as the batch got: dropped IF EXISTS
                        raise
                    created_db = spare_database != name
                    if account is None:
                        account = create_account(sessions.loader, self._params, self.dialect, name,
                                                 create_database=False)
                    elif spare_database != name:
                        account.conn.select_db(name)  # its home stays, empty, for when it is renewed
                        account.database = name
            except (pymysql.err.MySQLError, BackendUnavailableError) as exc:
                if isinstance(exc, pymysql.err.MySQLError) and is_connection_error(exc):
                    self._close_admin()  # the next open_episode reconnects (or restarts the server)
                self._undo(account, name if created_db else None)
                if isinstance(exc, pymysql.err.MySQLError) and not is_connection_error(exc):
                    raise ConfigError(f"the server rejected the tables of episode {name!r}: {format_error(exc)}") \
                        from exc
                raise BackendError(f"creating episode database {name!r} on {self._server.describe()} failed: "
                                   f"{exc}") from exc
            except BaseException:
                self._undo(account, name if created_db else None)
                raise
            sessions.used_at = time.monotonic()
            episode = MySQLEpisode(self, name, account.account, Session(account.conn, self.flavor, account.limit),
                                   self._generation, account.params)
            # Renewable unless it was made here for a named database (then that name is its home).
            episode.home = account.home if self._pool is not None and account.home != database else None
            self._episodes[name] = episode
            return episode

    def _loading(self) -> AbstractContextManager[None]:
        return self._pool.loading() if self._pool is not None else nullcontext()

    def _undo(self, account: Account | None, created: str | None) -> None:
        undo_account(self._sessions.loader if self._sessions is not None else None, account, created)

    def drop_episode(self, episode: MySQLEpisode, conn: Any) -> None:
        """Forget ``episode``; give its account and connection ``conn`` back to the worker to
        renew, or close ``conn`` and drop its user and databases (on the worker when there
        is one).

        Raises:
            BackendError: without a worker, the server refused the drop.
        """
        pymysql = load_pymysql()
        with self._lock:
            if self._episodes.get(episode.name) is episode:
                del self._episodes[episode.name]
            current = episode._generation == self._generation  # else its server was replaced
            renew = current and conn is not None and episode.home is not None and self._pool is not None
            if not renew:
                close_quietly(conn)
            if not current:
                return
            if self._admin_db == episode.name:
                self._admin_db = None  # the admin's default database is about to go
            if self._pool is not None:
                self._pool.refill()  # first: the account given back is one more, renewed while two episodes run
                if renew:
                    self._pool.give_back(Account(episode.user, episode.params, episode.name, conn, 0.0,
                                                 episode.last_timeout, home=episode.home or ""))
                else:
                    self._pool.drop_later(None, list(dict.fromkeys([episode.name, episode.home or episode.name])),
                                          user=episode.user)
                return
            if self._sessions is None:
                logger.warning("could not drop episode database %r: the connection to %s was lost", episode.name,
                               self._server.describe())
                return
            try:
                drop_account(self._sessions.loader, episode.user, [episode.name])
            except pymysql.err.MySQLError as exc:
                if not is_connection_error(exc):
                    raise BackendError(f"dropping episode database {episode.name!r} failed: {exc}") from exc
                # The server went away: a container takes the database with it; a DSN
                # server keeps it, so say so.
                self._dead = True
                logger.warning("could not drop episode database %r (%s): %s", episode.name,
                               self._server.describe(), exc)

    def admin_run(self, episode: MySQLEpisode, sql: str, timeout: float, max_rows: int) -> QueryResult:
        """Run ``sql`` with full rights for ``episode`` (its database the default one).

        Raises:
            BackendError: the server or the admin connection failed.
        """
        with self._lock:
            admin = self._check_generation(episode).admin
            return self._on_admin(episode, lambda: self._admin_statement(admin, episode, sql, timeout, max_rows))

    def hash_run(self, episode: MySQLEpisode, sql: str) -> QueryResult:
        """Run the table hash query ``sql`` (which names its database) on the hashing session,
        whose time limit and ``group_concat_max_len`` were set once when it connected.

        Raises:
            BackendError: the server or the connection failed.
        """
        with self._lock:
            hasher = self._check_generation(episode).hasher
            return self._on_admin(episode, lambda: run_statement(Session(hasher, self.flavor), sql, HASH_TIMEOUT_S, 1,
                                                                 self.killer, set_limit=False))

    def _admin_statement(self, admin: Any, episode: MySQLEpisode, sql: str, timeout: float,
                         max_rows: int) -> QueryResult:
        if self._admin_db != episode.name:
            admin.select_db(episode.name)
            self._admin_db = episode.name
        return run_statement(Session(admin, self.flavor), sql, timeout, max_rows, self.killer)

    def _check_generation(self, episode: MySQLEpisode) -> AdminSessions:
        if self._dead or self._sessions is None or episode._generation != self._generation:
            raise BackendError(f"{self._server.describe()} of episode {episode.name!r} is gone; open a new episode")
        return self._sessions

    def _require_sessions(self) -> AdminSessions:
        if self._sessions is None:
            raise BackendUnavailableError(f"no admin connection to {self._server.describe()}")
        return self._sessions

    def _on_admin(self, episode: MySQLEpisode, run: Callable[[], QueryResult]) -> QueryResult:
        """``run()``, its connection failures turned into typed errors (and the server checked)."""
        pymysql = load_pymysql()
        try:
            return run()
        except pymysql.err.MySQLError as exc:
            if not is_connection_error(exc):
                raise BackendError(f"admin query on episode {episode.name!r} failed: {exc}") from exc
            self._close_admin()
            if not self._server.alive():
                self._dead = True
            raise BackendError(f"lost the admin connection to {self._server.describe()} ({exc}); "
                               "open a new episode to recover") from exc

    def close(self) -> None:
        """Drop every open episode and the spares, close connections, remove the container we
        started. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for episode in list(self._episodes.values()):
                try:
                    episode.close()
                except BackendError as exc:
                    logger.warning("closing episode %r: %s", episode.name, exc)
            self._stop_pool()  # runs the queued drops and drops the spares, within its deadline
            self._close_admin()
            self.killer.close()
            self._server.stop()
