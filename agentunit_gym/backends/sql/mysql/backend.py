"""The backend: one server reused across episodes, a database and a user per episode, recovery.

Each episode gets its own database, created from the task's tables and dropped after, and
its own user that holds privileges on that database only; the agent's statements run on a
connection of that user (:mod:`.episode`).
"""

from __future__ import annotations

import logging
import secrets
import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentunit_gym.backends.sql.base import QueryResult, SQLBackend, TableData
from agentunit_gym.backends.sql.hashing import check_tables, quote_mysql_identifier, table_statements
from agentunit_gym.backends.sql.mysql.connection import (
    ER_DB_CREATE_EXISTS,
    ConnectParams,
    close_quietly,
    connect,
    error_code,
    format_error,
    is_connection_error,
    load_pymysql,
    parse_dsn,
)
from agentunit_gym.backends.sql.mysql.dialect import (
    MARIADB_SQL_MODE,
    MYSQL8_GROUP_CONCAT_MAX_LEN,
    MYSQL8_SQL_MODE,
    Dialect,
    apply_dialect,
    pick_dialect,
)
from agentunit_gym.backends.sql.mysql.episode import MySQLEpisode
from agentunit_gym.backends.sql.mysql.server import ContainerServer, DsnServer, Server
from agentunit_gym.backends.sql.mysql.statement import Killer, Session, run_statement
from agentunit_gym.errors import BackendError, BackendUnavailableError, ConfigError, EpisodeStateError

logger = logging.getLogger("agentunit_gym")

ADMIN_LOCK_WAIT_S = 5
"""Seconds the admin session waits for a lock the agent holds before its statement fails."""


def grant_pattern(database: str) -> str:
    r"""The database name as a GRANT pattern: ``_`` and ``%`` are wildcards there, so a
    grant on ``ep_1`` would also cover ``epX1``; escape them (and the escape character)."""
    return database.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")


def check_database_name(name: str) -> None:
    if not name or "\x00" in name or len(name) > 64 or name != name.rstrip(" "):
        raise ConfigError(
            f"database name {name!r} is not valid on MySQL: 1-64 characters, no NUL, no trailing space"
        )


class MySQLBackend(SQLBackend):
    """A MySQL-compatible server (our MariaDB container, an image you name, or a DSN).

    Example:
        >>> backend = MySQLBackend()                       # MariaDB container
        >>> backend = MySQLBackend(dsn="mysql://root:pw@127.0.0.1:3306/")   # existing server
        >>> db = backend.open_episode([TableData("t", (Column("x"),), (("1",),))])
        >>> db.execute("SELECT x FROM t").rows
        (('1',),)
        >>> backend.close()

    The backend is meant for one thread (one env); each episode's statements run one at a time.
    """

    kind = "mysql"

    def __init__(self, *, dsn: str | None = None, image: str | None = None, start_timeout: float | None = None,
                 memory_limit: str = "1g", tmpfs_size: str = "1g") -> None:
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

        Raises:
            BackendUnavailableError: no Docker daemon, the image is missing, or the server
                refuses the login. BackendTimeoutError: the server was not ready in time.
            ImageBuildError: the project's image could not be built.
        """
        if dsn is not None and image is not None:
            raise ConfigError("pass either dsn (an existing server) or image (a container to start), not both")
        self._server: Server = (DsnServer(parse_dsn(dsn)) if dsn is not None
                                 else ContainerServer(image, start_timeout, memory_limit, tmpfs_size))
        self._lock = threading.RLock()
        self._episodes: dict[str, MySQLEpisode] = {}
        self._closed = False
        self._dead = False
        self._generation = 0
        self._admin: Any = None
        self._admin_db: str | None = None
        self.flavor = "mariadb"
        self.server_version = ""
        self.dialect = Dialect(MARIADB_SQL_MODE, None)
        self._params = self._server.start()
        self._killer = Killer(self._params)
        try:
            self._connect_admin()
        except BaseException:
            self._server.stop()
            raise

    # -- server lifecycle -------------------------------------------------------------

    def _connect_admin(self) -> None:
        self._admin = connect(self._params, read_timeout=120.0)
        self._admin_db = None
        with self._admin.cursor() as cur:
            # If the agent holds a lock (LOCK TABLES, an open transaction), grading and
            # dropping must not wait a day for it (the defaults): fail fast instead.
            cur.execute(f"SET SESSION lock_wait_timeout = {ADMIN_LOCK_WAIT_S}")
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {ADMIN_LOCK_WAIT_S}")
            cur.execute("SELECT VERSION()")
            self.server_version = str(cur.fetchone()[0])
        self.flavor = "mariadb" if "mariadb" in self.server_version.lower() else "mysql"
        self.dialect = pick_dialect(self._admin, self.flavor)

    def _agent_connection(self, params: ConnectParams, database: str) -> Any:
        """A connection for an episode's user, set up as MySQL 8's sessions are (:class:`Dialect`).

        Raises:
            BackendUnavailableError: the login failed, or the server refused the settings.
        """
        conn = connect(params, database=database)
        try:
            apply_dialect(conn, self.dialect)
        except load_pymysql().err.MySQLError as exc:
            close_quietly(conn)
            raise BackendUnavailableError(f"setting up the session of {params.user!r} failed: {exc}") from exc
        return conn

    def _mark_dead(self) -> None:
        self._dead = True

    def _recover(self) -> None:
        """Make sure the server and the admin connection work, restarting what died."""
        pymysql = load_pymysql()
        if not self._dead and self._admin is not None:
            try:
                self._admin.ping(reconnect=False)
                return
            except pymysql.err.MySQLError:
                pass
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
        self._killer.close()
        self._server.stop()
        self._params = self._server.start()
        self._killer = Killer(self._params)
        self._generation += 1
        self._dead = False
        self._connect_admin()

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        close_quietly(admin)

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
        name = database if database is not None else f"agentunit_ep_{uuid.uuid4().hex[:12]}"
        check_database_name(name)
        pymysql = load_pymysql()
        with self._lock:
            self._recover()
            user = f"au_{uuid.uuid4().hex[:16]}"
            password = secrets.token_hex(16)
            account = f"'{user}'@'{self._params.account_host}'"
            db = quote_mysql_identifier(name)
            created_db = created_user = False
            try:
                with self._admin.cursor() as cur:
                    cur.execute("SET SESSION " + ("max_statement_time = 0" if self.flavor == "mariadb"
                                                  else "max_execution_time = 0"))
                    try:
                        cur.execute(f"CREATE DATABASE {db} {self.dialect.database_options}")
                    except pymysql.err.MySQLError as exc:
                        if error_code(exc) == ER_DB_CREATE_EXISTS:
                            raise BackendError(
                                f"a database named {name!r} already exists on {self._server.describe()}: another "
                                "episode uses it, or an earlier run left it behind. Close that episode, drop the "
                                "database, or let the backend pick a unique name."
                            ) from exc
                        raise
                    created_db = True
                    # Strict while loading: the task's rows go in exactly or the task is refused.
                    cur.execute(f"SET SESSION sql_mode = '{MYSQL8_SQL_MODE}'")
                    for table in tables:
                        self._create_table(cur, name, table)
                    cur.execute(f"SET SESSION sql_mode = '{self.dialect.sql_mode}'")
                    # Inlined, not a %s parameter: the account's host may be '%', which
                    # pymysql's formatting would read as a placeholder. The password is hex.
                    cur.execute(f"CREATE USER {account} IDENTIFIED BY '{password}'")
                    created_user = True
                    pattern = quote_mysql_identifier(grant_pattern(name))
                    cur.execute(f"GRANT ALL PRIVILEGES ON {pattern}.* TO {account}")
                conn = self._agent_connection(replace(self._params, user=user, password=password), name)
            except (pymysql.err.MySQLError, BackendUnavailableError) as exc:
                self._undo(name, account, created_db, created_user)
                if isinstance(exc, pymysql.err.MySQLError) and not is_connection_error(exc):
                    raise ConfigError(f"the server rejected the tables of episode {name!r}: {format_error(exc)}") \
                        from exc
                raise BackendError(f"creating episode database {name!r} on {self._server.describe()} failed: "
                                   f"{exc}") from exc
            except BaseException:
                self._undo(name, account, created_db, created_user)
                raise
            episode = MySQLEpisode(self, name, account, Session(conn, self.flavor), self._generation,
                                   replace(self._params, user=user, password=password))
            self._episodes[name] = episode
            return episode

    @staticmethod
    def _create_table(cur: Any, database: str, table: TableData) -> None:
        create, insert = table_statements(table, quote_mysql_identifier, "%s", database=database)
        cur.execute(create)
        if table.rows:
            # pymysql folds executemany of an INSERT ... VALUES into multi-row statements.
            cur.executemany(insert, table.rows)

    def _undo(self, name: str, account: str, created_db: bool, created_user: bool) -> None:
        """Best-effort cleanup of a half-created episode."""
        pymysql = load_pymysql()
        try:
            with self._admin.cursor() as cur:
                cur.execute(f"SET SESSION sql_mode = '{self.dialect.sql_mode}'")  # loading may have failed strict
                if created_user:
                    cur.execute(f"DROP USER IF EXISTS {account}")
                if created_db:
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_mysql_identifier(name)}")
        except pymysql.err.MySQLError:
            logger.warning("could not clean up half-created episode database %r", name)

    def _drop_episode(self, episode: MySQLEpisode) -> None:
        pymysql = load_pymysql()
        with self._lock:
            if self._episodes.get(episode.name) is episode:
                del self._episodes[episode.name]
            if episode._generation != self._generation or self._admin is None:
                return  # its server was replaced: nothing left to drop
            try:
                with self._admin.cursor() as cur:
                    # The user first: once it is gone nobody but us can reach the database.
                    cur.execute(f"DROP USER IF EXISTS {episode.user}")
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_mysql_identifier(episode.name)}")
                    if self._admin_db == episode.name:
                        self._admin_db = None
            except pymysql.err.MySQLError as exc:
                if not is_connection_error(exc):
                    raise BackendError(f"dropping episode database {episode.name!r} failed: {exc}") from exc
                # The server went away: a container takes the database with it; a DSN
                # server keeps it, so say so.
                self._dead = True
                logger.warning("could not drop episode database %r (%s): %s", episode.name,
                               self._server.describe(), exc)

    def _admin_run(self, episode: MySQLEpisode, sql: str, timeout: float, max_rows: int,
                   group_concat_max_len: int | None = None) -> QueryResult:
        pymysql = load_pymysql()
        with self._lock:
            if self._dead or self._admin is None or episode._generation != self._generation:
                raise BackendError(f"{self._server.describe()} of episode {episode.name!r} is gone; "
                                   "open a new episode")
            try:
                with self._admin.cursor() as cur:
                    if self._admin_db != episode.name:
                        cur.execute(f"USE {quote_mysql_identifier(episode.name)}")
                        self._admin_db = episode.name
                    if group_concat_max_len is not None:
                        cur.execute(f"SET SESSION group_concat_max_len = {int(group_concat_max_len)}")
                session = Session(self._admin, self.flavor)
                try:
                    return run_statement(session, sql, timeout, max_rows, self._killer)
                finally:
                    if group_concat_max_len is not None and self._admin.open:
                        with self._admin.cursor() as cur:
                            cur.execute(f"SET SESSION group_concat_max_len = {MYSQL8_GROUP_CONCAT_MAX_LEN}")
            except pymysql.err.MySQLError as exc:
                if not is_connection_error(exc):
                    raise BackendError(f"admin query on episode {episode.name!r} failed: {exc}") from exc
                self._close_admin()
                if not self._server.alive():
                    self._dead = True
                raise BackendError(f"lost the admin connection to {self._server.describe()} ({exc}); "
                                   "open a new episode to recover") from exc

    def close(self) -> None:
        """Drop every open episode, close connections, remove the container we started. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for episode in list(self._episodes.values()):
                try:
                    episode.close()
                except BackendError as exc:
                    logger.warning("closing episode %r: %s", episode.name, exc)
            self._close_admin()
            self._killer.close()
            self._server.stop()
