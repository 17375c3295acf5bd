"""Connections to the server: where and as whom, one way to open them, and what their errors mean.

pymysql is used through :func:`connect` only, always with SSL off: pymysql otherwise builds
an SSL context on every connect (20-35 ms against under 1 ms); the traffic never leaves the
machine's socket or loopback in the default setup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from agentunit_gym.errors import BackendUnavailableError, ConfigError, MissingDependencyError

# Server errors that mean "the statement hit a time limit": MariaDB's max_statement_time,
# MySQL's max_execution_time, and KILL QUERY (ours).
ER_STATEMENT_TIMEOUT = 1969
ER_QUERY_TIMEOUT = 3024
ER_QUERY_INTERRUPTED = 1317
ER_DB_CREATE_EXISTS = 1007
ER_CONNECTION_KILLED = 1927
# Client-side error codes (CR_*, 2000-2999) and pymysql's code 0 mean the connection is
# broken, not that the SQL was wrong.
CLIENT_ERROR_CODES = range(2000, 3000)


def load_pymysql() -> Any:
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
            read_timeout: float | None = None, collation: str | None = None,
            init_command: str | None = None, multi_statements: bool = False) -> Any:
    """Open a pymysql connection: autocommit, utf8mb4, SSL off, one statement per call.

    ``collation`` goes into the ``SET NAMES`` pymysql sends on every connect, and
    ``init_command`` runs right after it: a session set up in the login's own round trips.
    ``multi_statements`` lets one call carry several statements (:func:`run_batch`): for
    the admin side's own SQL only, never for a connection that runs the agent's or a task's.

    Raises:
        MissingDependencyError: pymysql is not installed.
        BackendUnavailableError: the server cannot be reached or refuses the login.
    """
    pymysql = load_pymysql()
    try:
        return pymysql.connect(
            user=params.user, password=params.password, host=params.host, port=params.port,
            unix_socket=params.unix_socket, database=database, charset="utf8mb4", autocommit=True,
            ssl_disabled=True, local_infile=False, connect_timeout=connect_timeout,
            read_timeout=read_timeout, write_timeout=read_timeout, collation=collation,
            init_command=init_command,
            client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS if multi_statements else 0,
        )
    except pymysql.err.MySQLError as exc:
        raise BackendUnavailableError(
            f"cannot connect to the MySQL server as {params.describe()}: {exc}. Check that the server runs "
            "and the DSN's user and password are right."
        ) from exc


def error_code(exc: BaseException) -> int:
    code = exc.args[0] if exc.args else 0
    return code if isinstance(code, int) else 0


def is_connection_error(exc: BaseException) -> bool:
    pymysql = load_pymysql()
    if isinstance(exc, (pymysql.err.InterfaceError, OSError)):
        return True
    code = error_code(exc)
    return code == 0 or code in CLIENT_ERROR_CODES


def format_error(exc: BaseException) -> str:
    code = error_code(exc)
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    return f"ERROR {code}: {message}" if code else str(message)


def close_quietly(conn: Any) -> None:
    """Close a connection that may already be broken (closing a dead socket fails in many ways)."""
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the connection is being discarded either way
        pass


def run_batch(conn: Any, statements: Sequence[str]) -> None:
    """Run ``statements`` in one round trip on a ``multi_statements`` connection.

    The server stops at the first failing statement; its error is raised here.

    Raises:
        pymysql.err.MySQLError: a statement failed, or the connection did.
    """
    if not statements:
        return
    with conn.cursor() as cur:
        cur.execute(";\n".join(statements))
        while cur.nextset():
            pass
