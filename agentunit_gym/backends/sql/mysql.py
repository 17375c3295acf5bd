"""The server SQL backend: MySQL or MariaDB, in a container of ours or an existing server.

One server per backend instance, reused across episodes:

- by default a MariaDB container from the project's ``mariadb`` image (Debian's
  mariadb-server, so it builds without a registry), datadir on tmpfs, ``--network none``,
  clients coming through a unix socket in a bind-mounted host directory; or a container of
  an image the user names (``image="mysql:8"``), started the way the official images expect;
- or an existing server given by a DSN, ``mysql://user:pass@host:port/`` (or
  ``?unix_socket=/path``), whose user may create databases and users and grant on them.

Each episode gets its own database, created from the task's tables and dropped after, and
its own user that holds privileges on that database only; the agent's statements run on a
connection of that user. A statement time limit is enforced by the server
(``max_statement_time`` on MariaDB, ``max_execution_time`` on MySQL, set before every
statement so the agent cannot lift it), backed by ``KILL QUERY`` from a second admin
connection shortly after the limit, and by a client read timeout after that.

pymysql is used through :func:`connect` only, always with SSL off: pymysql otherwise builds
an SSL context on every connect (20-35 ms against under 1 ms); the traffic never leaves the
machine's socket or loopback in the default setup.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from agentunit_gym.backends import process
from agentunit_gym.backends.sql.base import (
    EpisodeDatabase,
    QueryResult,
    SQLBackend,
    TableData,
    check_limits,
    fetch_capped,
)
from agentunit_gym.backends.sql.hashing import (
    AGENTBENCH_GROUP_CONCAT_MAX_LEN,
    HASH_TIMEOUT_S,
    check_tables,
    hash_from_result,
    mysql_table_hash_sql,
    quote_mysql_identifier,
    table_statements,
)
from agentunit_gym.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
    MissingDependencyError,
)

logger = logging.getLogger("agentunit_gym")

SOCKET_DIR_IN_CONTAINER = "/run/agentunit"
SOCKET_NAME = "mysqld.sock"
ADMIN_USER = "agentunit_admin"
CONTAINER_LABELS = {"agentunit_gym": "1", "agentunit_gym.role": "sql-server"}

KILL_GRACE_S = 0.5
"""How long past its limit a statement may run before we send ``KILL QUERY`` ourselves
(the server's own limit normally ends it first)."""
READ_GRACE_S = 5.0
"""How long after ``KILL QUERY`` we wait for the server to answer before giving up on the
connection (the server is then hung or gone: an infrastructure failure)."""

ADMIN_LOCK_WAIT_S = 5
"""Seconds the admin session waits for a lock the agent holds before its statement fails."""

_KILL = re.compile(r"\bkill\b", re.IGNORECASE)
"""A statement that mentions KILL and loses its connection killed its own session."""
# Server errors that mean "the statement hit a time limit": MariaDB's max_statement_time,
# MySQL's max_execution_time, and KILL QUERY (ours).
_ER_STATEMENT_TIMEOUT = 1969
_ER_QUERY_TIMEOUT = 3024
_ER_QUERY_INTERRUPTED = 1317
_ER_DB_CREATE_EXISTS = 1007
_ER_CONNECTION_KILLED = 1927
# Client-side error codes (CR_*, 2000-2999) and pymysql's code 0 mean the connection is
# broken, not that the SQL was wrong.
_CLIENT_ERROR_CODES = range(2000, 3000)

_DEFAULT_IMAGE = "mariadb"
"""Name of the project's image directory (``agentunit_gym/images/mariadb``)."""

# -- MySQL 8's dialect --------------------------------------------------------------------------
# AgentBench grades its DB items on the official mysql:8 image started with no sql_mode or
# collation option, so its sessions run MySQL 8.0's defaults. Every session we open (the
# agent's and the admin one that replays reference SQL and hashes tables) is set to those,
# on our MariaDB container and on any server reached by DSN. See docs/sql-backends.md.

MYSQL8_SQL_MODE = ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                   "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")
"""MySQL 8.0's default ``sql_mode``."""
MARIADB_SQL_MODE = ",".join(mode for mode in MYSQL8_SQL_MODE.split(",") if mode != "STRICT_TRANS_TABLES")
"""MySQL 8.0's modes less strict mode, for MariaDB. MySQL converts a TEXT value to a number
silently (``WHERE No = 16`` over rows holding text), MariaDB with a 1292 warning that strict
mode turns into an error in UPDATE and DELETE; without strict mode the statement runs as on
MySQL 8. The cost, documented: values MySQL 8 rejects in a data change (1/0, a too long
value) are stored as NULL or cut, with a warning."""
MYSQL8_COLLATION = "utf8mb4_0900_ai_ci"
"""MySQL 8.0's default utf8mb4 collation: UCA 9.0, accent and case insensitive, NO PAD."""
MARIADB_COLLATION = "utf8mb4_uca1400_nopad_ai_ci"
"""The closest MariaDB (10.10+) has: UCA 14.0, accent and case insensitive, NO PAD."""
MYSQL8_GROUP_CONCAT_MAX_LEN = 1024
"""MySQL 8.0's default (MariaDB's is 1 MiB): a longer GROUP_CONCAT result is cut there."""
_ER_UNKNOWN_COLLATION = 1273


@dataclass(frozen=True)
class Dialect:
    """The session settings that make a server behave as AgentBench's MySQL 8."""

    sql_mode: str
    collation: str | None
    """None when the server has no collation close to MySQL 8's (it keeps its own)."""

    def session_statements(self) -> list[str]:
        """The statements that set a fresh session up."""
        statements = [f"SET SESSION sql_mode = '{self.sql_mode}'",
                      f"SET SESSION group_concat_max_len = {MYSQL8_GROUP_CONCAT_MAX_LEN}"]
        if self.collation is not None:
            statements.append(f"SET NAMES utf8mb4 COLLATE {self.collation}")
        return statements

    @property
    def database_options(self) -> str:
        """``CREATE DATABASE`` options: tables created in it take their collation from it."""
        return "CHARACTER SET utf8mb4" + (f" COLLATE {self.collation}" if self.collation else "")


def _pick_dialect(conn: Any, flavor: str) -> Dialect:
    """MySQL 8's settings as far as the server supports them (probed on ``conn``, then set on it).

    Raises:
        pymysql.err.MySQLError: the server refused a setting other than an unknown collation.
    """
    pymysql = _pymysql()
    sql_mode = MARIADB_SQL_MODE if flavor == "mariadb" else MYSQL8_SQL_MODE
    collation: str | None = MARIADB_COLLATION if flavor == "mariadb" else MYSQL8_COLLATION
    with conn.cursor() as cur:
        try:
            cur.execute(f"SET NAMES utf8mb4 COLLATE {collation}")
        except pymysql.err.MySQLError as exc:
            if _error_code(exc) != _ER_UNKNOWN_COLLATION:
                raise
            collation = None  # an older server (MariaDB < 10.10, MySQL 5.7): its own default
    dialect = Dialect(sql_mode, collation)
    _apply_dialect(conn, dialect)
    return dialect


def _apply_dialect(conn: Any, dialect: Dialect) -> None:
    with conn.cursor() as cur:
        for statement in dialect.session_statements():
            cur.execute(statement)


def _pymysql() -> Any:
    try:
        import pymysql
    except ImportError as exc:
        raise MissingDependencyError("pymysql", "mysql", "The mysql SQL backend") from exc
    return pymysql


@dataclass(frozen=True)
class ConnectParams:
    """Where and as whom to connect. ``unix_socket`` wins over ``host``/``port`` when set."""

    user: str
    password: str = ""
    host: str = "127.0.0.1"
    port: int = 3306
    unix_socket: str | None = None

    @property
    def account_host(self) -> str:
        """The host part for accounts we create: ``localhost`` for socket clients, else ``%``."""
        return "localhost" if self.unix_socket else "%"

    def describe(self) -> str:
        where = f"unix socket {self.unix_socket}" if self.unix_socket else f"{self.host}:{self.port}"
        return f"{self.user}@{where}"


def parse_dsn(dsn: str) -> ConnectParams:
    """Parse ``mysql://user:pass@host:port/`` (also ``mariadb://``, ``?unix_socket=/path``).

    User and password are percent-decoded; the path (a database name) is ignored because
    every episode creates its own database.

    Raises:
        ConfigError: another scheme, or no user.
    """
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ConfigError(f"a MySQL DSN looks like mysql://user:pass@host:port/ ; got scheme {parts.scheme!r}")
    if not parts.username:
        raise ConfigError("the MySQL DSN names no user: expected mysql://user:pass@host:port/")
    query = parse_qs(parts.query)
    try:
        port = parts.port or 3306
    except ValueError as exc:
        raise ConfigError(f"the MySQL DSN has an invalid port: {exc}") from exc
    return ConnectParams(
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        host=parts.hostname or "127.0.0.1",
        port=port,
        unix_socket=query.get("unix_socket", [None])[0],
    )


def connect(params: ConnectParams, *, database: str | None = None, connect_timeout: float = 5.0,
            read_timeout: float | None = None) -> Any:
    """Open a pymysql connection: autocommit, utf8mb4, SSL off, one statement per call.

    Raises:
        MissingDependencyError: pymysql is not installed.
        BackendUnavailableError: the server cannot be reached or refuses the login.
    """
    pymysql = _pymysql()
    try:
        return pymysql.connect(
            user=params.user, password=params.password, host=params.host, port=params.port,
            unix_socket=params.unix_socket, database=database, charset="utf8mb4", autocommit=True,
            ssl_disabled=True, local_infile=False, connect_timeout=connect_timeout,
            read_timeout=read_timeout, write_timeout=read_timeout,
        )
    except pymysql.err.MySQLError as exc:
        raise BackendUnavailableError(
            f"cannot connect to the MySQL server as {params.describe()}: {exc}. Check that the server runs "
            "and the DSN's user and password are right."
        ) from exc


def _error_code(exc: BaseException) -> int:
    code = exc.args[0] if exc.args else 0
    return code if isinstance(code, int) else 0


def _is_connection_error(exc: BaseException) -> bool:
    pymysql = _pymysql()
    if isinstance(exc, (pymysql.err.InterfaceError, OSError)):
        return True
    code = _error_code(exc)
    return code == 0 or code in _CLIENT_ERROR_CODES


def _format_error(exc: BaseException) -> str:
    code = _error_code(exc)
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    return f"ERROR {code}: {message}" if code else str(message)


def _grant_pattern(database: str) -> str:
    r"""The database name as a GRANT pattern: ``_`` and ``%`` are wildcards there, so a
    grant on ``ep_1`` would also cover ``epX1``; escape them (and the escape character)."""
    return database.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")


def _check_database_name(name: str) -> None:
    if not name or "\x00" in name or len(name) > 64 or name != name.rstrip(" "):
        raise ConfigError(
            f"database name {name!r} is not valid on MySQL: 1-64 characters, no NUL, no trailing space"
        )


class _Session:
    """A connection plus the bookkeeping to run one statement on it with a time limit."""

    def __init__(self, conn: Any, flavor: str) -> None:
        self.conn = conn
        self.flavor = flavor
        self.thread_id: int = conn.thread_id()


def _run_statement(session: _Session, sql: str, timeout: float, max_rows: int,
                   killer: _Killer) -> QueryResult:
    """Run ``sql`` on ``session`` with a server-side time limit, a KILL QUERY backstop and a
    client read deadline. SQL errors and timeouts come back as results.

    Raises:
        pymysql.err.MySQLError: the connection failed (the caller turns it into a typed error).
    """
    check_limits(timeout, max_rows)
    pymysql = _pymysql()
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
        if _is_connection_error(exc):
            raise
        code = errno = _error_code(exc)
        error = _format_error(exc)
        timed_out = code in (_ER_STATEMENT_TIMEOUT, _ER_QUERY_TIMEOUT) or (
            code == _ER_QUERY_INTERRUPTED and watchdog.fired
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
        _absorb_kill(conn)
    if session.flavor == "mysql" and not timed_out and duration >= timeout:
        # MySQL ends a SLEEP() cut by max_execution_time with the result 1, not an error:
        # a statement that ran up to the limit was stopped by it.
        timed_out = True
    return QueryResult(columns=columns, rows=tuple(kept), rowcount=total, truncated=truncated,
                       error=error, timed_out=timed_out, duration_s=duration,
                       extra={} if errno is None else {"errno": errno})


def _close_quietly(conn: Any) -> None:
    """Close a connection that may already be broken (closing a dead socket fails in many ways)."""
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the connection is being discarded either way
        pass


def _absorb_kill(conn: Any) -> None:
    pymysql = _pymysql()
    for _ in range(2):
        try:
            with conn.cursor() as cur:
                cur.execute("DO 0")
            return
        except pymysql.err.MySQLError as exc:
            if _is_connection_error(exc) or _error_code(exc) != _ER_QUERY_INTERRUPTED:
                return


class _Watchdog:
    def __init__(self, timer: threading.Timer | None) -> None:
        self._timer = timer
        self.fired = False

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            # If the timer is running its KILL right now, wait for it (bounded by its own
            # connect and read timeouts) so the kill cannot land on a later statement.
            self._timer.join(timeout=10.0)


class _Killer:
    """Sends ``KILL QUERY`` from its own admin connection when a statement overruns."""

    def __init__(self, params: ConnectParams) -> None:
        self._params = params
        self._conn: Any = None
        self._lock = threading.Lock()

    def arm(self, thread_id: int, after: float) -> _Watchdog:
        watchdog = _Watchdog(None)

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
        pymysql = _pymysql()
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
                    if not _is_connection_error(exc):
                        return False  # unknown thread: it ended meanwhile
                    self._close()
            return False

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        _close_quietly(conn)

    def close(self) -> None:
        with self._lock:
            self._close()


# --- servers -------------------------------------------------------------------------------


class _Server(ABC):
    """Where the backend's server lives; :meth:`start` returns the admin's connect params."""

    @abstractmethod
    def start(self) -> ConnectParams: ...

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def stop(self) -> None: ...

    @property
    def restartable(self) -> bool:
        return False


class _DsnServer(_Server):
    def __init__(self, params: ConnectParams) -> None:
        self.params = params

    def start(self) -> ConnectParams:
        return self.params

    def alive(self) -> bool:
        try:
            connect(self.params, connect_timeout=3.0, read_timeout=5.0).close()
        except BackendUnavailableError:
            return False
        return True

    def describe(self) -> str:
        return f"the server at {self.params.describe()}"

    def stop(self) -> None:
        return None


def _remove_container(container: Any, workdir: str) -> None:
    """Finalizer: remove the container and its socket directory (also at interpreter exit)."""
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone, or the daemon went away: nothing left to do
        pass
    shutil.rmtree(workdir, ignore_errors=True)


class _ContainerServer(_Server):
    """A MySQL-compatible server in a container we start, on ``--network none``."""

    def __init__(self, image: str | None, start_timeout: float | None, memory_limit: str,
                 tmpfs_size: str) -> None:
        self.image = image
        self.ours = image is None or image.startswith("agentunit-gym/mariadb")
        self.start_timeout = start_timeout if start_timeout is not None else (60.0 if self.ours else 180.0)
        self.memory_limit = memory_limit
        self.tmpfs_size = tmpfs_size
        self.container: Any = None
        self.name: str | None = None
        self._finalizer: weakref.finalize[[Any, str], _ContainerServer] | None = None

    @property
    def restartable(self) -> bool:
        return True

    def _image_tag(self, client: Any) -> str:
        if self.image is None:
            from agentunit_gym.backends.images import ensure_image

            return ensure_image(_DEFAULT_IMAGE, client=client)
        from docker.errors import ImageNotFound

        try:
            client.images.get(self.image)
        except ImageNotFound as exc:
            raise BackendUnavailableError(
                f"image {self.image!r} is not on this Docker daemon. Pull it (docker pull {self.image}) "
                "or leave image unset to use the project's MariaDB image."
            ) from exc
        return self.image

    def start(self) -> ConnectParams:
        from docker.errors import APIError

        client = process.docker_client()
        tag = self._image_tag(client)
        workdir = tempfile.mkdtemp(prefix="agentunit-sql-")
        sockdir = os.path.join(workdir, "sock")
        os.mkdir(sockdir)
        # The server runs as its own user inside the container and must create the socket
        # here; the 0700 parent keeps other host users out of the directory.
        os.chmod(sockdir, 0o777)
        password = secrets.token_hex(16)
        user = ADMIN_USER if self.ours else "root"
        environment = ({"AGENTUNIT_ADMIN_PASSWORD": password, "AGENTUNIT_ADMIN_USER": ADMIN_USER} if self.ours
                       else {"MYSQL_ROOT_PASSWORD": password, "MARIADB_ROOT_PASSWORD": password})
        command = None if self.ours else [
            f"--socket={SOCKET_DIR_IN_CONTAINER}/{SOCKET_NAME}", "--skip-networking", "--skip-log-bin",
            "--local-infile=0", "--performance-schema=OFF",
        ]
        self.name = f"agentunit-gym-sql-{uuid.uuid4().hex[:12]}"
        try:
            self.container = client.containers.run(
                tag, command=command, name=self.name, detach=True, labels=CONTAINER_LABELS,
                network_mode="none", init=True, environment=environment, mem_limit=self.memory_limit,
                tmpfs={"/var/lib/mysql": f"rw,size={self.tmpfs_size},mode=0755"},
                volumes={sockdir: {"bind": SOCKET_DIR_IN_CONTAINER, "mode": "rw"}},
            )
        except APIError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise BackendUnavailableError(f"cannot start the SQL server container from {tag}: {exc}") from exc
        self._finalizer = weakref.finalize(self, _remove_container, self.container, workdir)
        params = ConnectParams(user=user, password=password, unix_socket=os.path.join(sockdir, SOCKET_NAME))
        self._wait_ready(params, tag)
        return params

    def _wait_ready(self, params: ConnectParams, tag: str) -> None:
        """Poll (with a deadline) until the server accepts the admin login."""
        from docker.errors import NotFound

        deadline = time.monotonic() + self.start_timeout
        last = "the socket did not appear"
        socket_path = params.unix_socket or ""
        while True:
            if os.path.exists(socket_path):
                try:
                    connect(params, connect_timeout=2.0, read_timeout=5.0).close()
                    return
                except BackendUnavailableError as exc:
                    last = str(exc)
            try:
                self.container.reload()
                status = self.container.status
            except NotFound:
                status = "removed"
            if status in ("exited", "dead", "removed"):
                logs = self._logs()
                self.stop()
                raise BackendUnavailableError(
                    f"the SQL server container ({tag}) stopped while starting (status {status}). "
                    f"Last log lines:\n{logs}"
                )
            if time.monotonic() > deadline:
                logs = self._logs()
                self.stop()
                raise BackendTimeoutError(
                    f"the SQL server container ({tag}) was not ready within {self.start_timeout:g} s "
                    f"({last}). Pass a larger start_timeout on a slow machine. Last log lines:\n{logs}"
                )
            time.sleep(0.02)  # poll interval of the readiness check; the deadline bounds it

    def _logs(self) -> str:
        try:
            return str(self.container.logs(tail=20).decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - best effort: logs only enrich an error message
            return "(no logs)"

    def alive(self) -> bool:
        from docker.errors import DockerException

        if self.container is None:
            return False
        try:
            self.container.reload()
        except DockerException:
            return False
        return bool(self.container.status == "running")

    def describe(self) -> str:
        return f"the SQL server container {self.name}"

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs once: removes the container and the socket dir
            self._finalizer = None
        self.container = None


# --- episodes and backend ------------------------------------------------------------------


class MySQLEpisode(EpisodeDatabase):
    """One episode's database on the backend's server, reached as the episode's own user."""

    def __init__(self, backend: MySQLBackend, name: str, user: str, session: _Session, generation: int,
                 params: ConnectParams) -> None:
        self.name = name
        self.user = user
        self._params = params
        self._backend = backend
        self._session: _Session | None = session
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
        pymysql = _pymysql()
        try:
            result = _run_statement(self._session, sql, timeout, max_rows, self._backend._killer)
            if result.extra.get("errno") != _ER_CONNECTION_KILLED:
                # AgentBench commits after every statement of the agent (autocommit off, a
                # commit after each): an explicit START TRANSACTION ends at once, and grading
                # sees every change, as on its server.
                self._session.conn.commit()
        except pymysql.err.MySQLError as exc:
            if not _is_connection_error(exc):
                # Only our own bookkeeping statements (the time limit, the commit) can fail this way.
                raise BackendError(f"setting up a statement of episode {self.name!r} failed: {exc}") from exc
            if _KILL.search(sql) and self._backend._server.alive():
                return self._reconnect_after_self_kill(_format_error(exc))
            raise self._lose(exc, timeout) from exc
        if result.extra.get("errno") == _ER_CONNECTION_KILLED:
            return self._reconnect_after_self_kill(result.error or "")
        return result

    def _reconnect_after_self_kill(self, error: str) -> QueryResult:
        """The agent's own statement ended its connection (``KILL CONNECTION_ID()``): an agent
        action, so an error result and a fresh connection, not an infrastructure failure."""
        if self._session is not None:
            _close_quietly(self._session.conn)
        self._session = None
        try:
            self._session = _Session(self._backend._agent_connection(self._params, self.name), self._backend.flavor)
        except BackendUnavailableError as again:
            self._lost = str(again)
            raise BackendError(f"episode {self.name!r} cannot reconnect after its connection was killed: "
                               f"{again}") from again
        return QueryResult(error=f"{error} (the statement ended this session's own connection; a new "
                                 "connection was opened: session variables and open transactions are gone)")

    def _lose(self, exc: BaseException, timeout: float) -> Exception:
        """Record a dropped agent connection and build the typed error to raise."""
        session, self._session = self._session, None
        if session is not None:
            _close_quietly(session.conn)
        self._lost = str(exc)
        alive = self._backend._server.alive()
        if not alive:
            self._backend._mark_dead()
            return BackendError(
                f"{self._backend._server.describe()} is gone ({exc}). Episode {self.name!r} cannot continue; "
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
        return self._backend._admin_run(self, sql, timeout, max_rows)

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
        result = self._backend._admin_run(self, sql, HASH_TIMEOUT_S, 1,
                                          group_concat_max_len=AGENTBENCH_GROUP_CONCAT_MAX_LEN)
        return hash_from_result(result, table, self.name)

    def close(self) -> None:
        """Close the agent's connection, drop the episode's user and database. Idempotent."""
        if self._closed:
            return
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            _close_quietly(session.conn)
        self._backend._drop_episode(self)


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
        self._server: _Server = (_DsnServer(parse_dsn(dsn)) if dsn is not None
                                 else _ContainerServer(image, start_timeout, memory_limit, tmpfs_size))
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
        self._killer = _Killer(self._params)
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
        self.dialect = _pick_dialect(self._admin, self.flavor)

    def _agent_connection(self, params: ConnectParams, database: str) -> Any:
        """A connection for an episode's user, set up as MySQL 8's sessions are (:class:`Dialect`).

        Raises:
            BackendUnavailableError: the login failed, or the server refused the settings.
        """
        conn = connect(params, database=database)
        try:
            _apply_dialect(conn, self.dialect)
        except _pymysql().err.MySQLError as exc:
            _close_quietly(conn)
            raise BackendUnavailableError(f"setting up the session of {params.user!r} failed: {exc}") from exc
        return conn

    def _mark_dead(self) -> None:
        self._dead = True

    def _recover(self) -> None:
        """Make sure the server and the admin connection work, restarting what died."""
        pymysql = _pymysql()
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
        self._killer = _Killer(self._params)
        self._generation += 1
        self._dead = False
        self._connect_admin()

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        _close_quietly(admin)

    @property
    def container_name(self) -> str | None:
        """The server container's name (None for a DSN server)."""
        return self._server.name if isinstance(self._server, _ContainerServer) else None

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
        _check_database_name(name)
        pymysql = _pymysql()
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
                        if _error_code(exc) == _ER_DB_CREATE_EXISTS:
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
                    pattern = quote_mysql_identifier(_grant_pattern(name))
                    cur.execute(f"GRANT ALL PRIVILEGES ON {pattern}.* TO {account}")
                conn = self._agent_connection(replace(self._params, user=user, password=password), name)
            except (pymysql.err.MySQLError, BackendUnavailableError) as exc:
                self._undo(name, account, created_db, created_user)
                if isinstance(exc, pymysql.err.MySQLError) and not _is_connection_error(exc):
                    raise ConfigError(f"the server rejected the tables of episode {name!r}: {_format_error(exc)}") \
                        from exc
                raise BackendError(f"creating episode database {name!r} on {self._server.describe()} failed: "
                                   f"{exc}") from exc
            except BaseException:
                self._undo(name, account, created_db, created_user)
                raise
            episode = MySQLEpisode(self, name, account, _Session(conn, self.flavor), self._generation,
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
        pymysql = _pymysql()
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
        pymysql = _pymysql()
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
                if not _is_connection_error(exc):
                    raise BackendError(f"dropping episode database {episode.name!r} failed: {exc}") from exc
                # The server went away: a container takes the database with it; a DSN
                # server keeps it, so say so.
                self._dead = True
                logger.warning("could not drop episode database %r (%s): %s", episode.name,
                               self._server.describe(), exc)

    def _admin_run(self, episode: MySQLEpisode, sql: str, timeout: float, max_rows: int,
                   group_concat_max_len: int | None = None) -> QueryResult:
        pymysql = _pymysql()
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
                session = _Session(self._admin, self.flavor)
                try:
                    return _run_statement(session, sql, timeout, max_rows, self._killer)
                finally:
                    if group_concat_max_len is not None and self._admin.open:
                        with self._admin.cursor() as cur:
                            cur.execute(f"SET SESSION group_concat_max_len = {MYSQL8_GROUP_CONCAT_MAX_LEN}")
            except pymysql.err.MySQLError as exc:
                if not _is_connection_error(exc):
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
