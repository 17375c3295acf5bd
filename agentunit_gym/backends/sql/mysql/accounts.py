"""Episode accounts: a user that holds privileges on one database only, and its connection.

An account is made once (``CREATE USER`` and a ``GRANT`` on its database's name) and then
serves episode after episode (:func:`renew_account`): the database is dropped and created
again under the same name, which the grant survives (after a database the task named: every
right revoked, that database dropped, the grant given back on the account's own), and the
connection's session is reset (``COM_RESET_CONNECTION``) instead of logging in again. What one episode's session leaves
behind (temporary tables, user variables, prepared statements, session variables, open
transactions, table and named locks) goes with the reset; what it leaves in its database
(tables, views, triggers, routines, events) goes with the database; a password the agent set
on itself (``SET PASSWORD``, allowed by default) only matters to a new login, which restores
the account's own password first (:func:`restore_password_sql`). See docs/sql-backends.md.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentunit_gym.backends.sql.hashing import quote_mysql_identifier
from agentunit_gym.backends.sql.mysql.connection import (
    ER_DB_CREATE_EXISTS,
    ConnectParams,
    close_quietly,
    connect,
    error_code,
    load_pymysql,
    run_batch,
)
from agentunit_gym.backends.sql.mysql.dialect import Dialect
from agentunit_gym.errors import BackendUnavailableError

logger = logging.getLogger("agentunit_gym")

ADMIN_LOCK_WAIT_S = 5
"""Seconds an admin session waits for a lock the agent holds before its statement fails."""
COM_RESET_CONNECTION = 0x1F
"""The protocol command that resets a session without a new login (MySQL 5.7+, MariaDB
10.2.4+); pymysql 1.x sends it with its generic command call."""


def grant_pattern(database: str) -> str:
    r"""The database name as a GRANT pattern: ``_`` and ``%`` are wildcards there, so a
    grant on ``ep_1`` would also cover ``epX1``; escape them (and the escape character)."""
    return database.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")


def unique_database_name() -> str:
    return f"agentunit_ep_{uuid.uuid4().hex[:12]}"


def open_admin(params: ConnectParams, *, multi_statements: bool = False) -> Any:
    """An admin connection whose statements fail fast on a lock the agent holds.

    Raises:
        BackendUnavailableError: the server cannot be reached.
    """
    conn = connect(params, read_timeout=120.0, multi_statements=multi_statements)
    try:
        with conn.cursor() as cur:
            # If the agent holds a lock (LOCK TABLES, an open transaction), grading and
            # dropping must not wait a day for it (the defaults): fail fast instead.
            cur.execute(f"SET SESSION lock_wait_timeout = {ADMIN_LOCK_WAIT_S}, "
                        f"innodb_lock_wait_timeout = {ADMIN_LOCK_WAIT_S}")
    except load_pymysql().err.MySQLError as exc:
        close_quietly(conn)
        raise BackendUnavailableError(f"setting up the admin session failed: {exc}") from exc
    return conn


@dataclass
class Account:
    """An episode's user, the database it may reach and its connection to it."""

    account: str
    """The quoted account, ``'au_...'@'localhost'``."""
    params: ConnectParams
    """How to log in again as this user (after the agent killed its own connection)."""
    database: str
    """The one database the user holds privileges on (a spare's own unique one until renamed)."""
    conn: Any
    made_at: float
    limit: float | None = None
    """The statement time limit set on ``conn`` (None: none of ours)."""
    home: str = ""
    """The account's own database, made with it under a unique name (``""``: :attr:`database`).
    A task that names its database moves the grant from home to that name for one episode;
    home stays, empty, and the grant goes back to it when the account is renewed."""

    def __post_init__(self) -> None:
        if not self.home:
            self.home = self.database


def create_account(admin: Any, params: ConnectParams, dialect: Dialect, database: str, *,
                   create_database: bool) -> Account:
    """A new user with every privilege on ``database`` only, and its connection into it.

    Args:
        admin: the admin connection to create them on (of the calling thread, with
            ``multi_statements``: one round trip for the three statements).
        params: the admin's connect parameters (host or socket; user and password replaced).
        dialect: the session settings for the user's connection.
        database: the database; created here (empty) when ``create_database``.
        create_database: False when the caller created it already.

    Raises:
        pymysql.err.MySQLError: a statement failed; nothing is left behind.
        BackendUnavailableError: the user's login failed; nothing is left behind.
    """
    user = f"au_{uuid.uuid4().hex[:16]}"
    password = secrets.token_hex(16)
    account = f"'{user}'@'{params.account_host}'"
    statements = [f"CREATE DATABASE {quote_mysql_identifier(database)} {dialect.database_options}"] \
        if create_database else []
    # Inlined, not a %s parameter: the account's host may be '%', which pymysql's formatting
    # would read as a placeholder. The password is hex.
    statements += [f"CREATE USER {account} IDENTIFIED BY '{password}'",
                   f"GRANT ALL PRIVILEGES ON {quote_mysql_identifier(grant_pattern(database))}.* TO {account}"]
    try:
        run_batch(admin, statements)
        user_params = replace(params, user=user, password=password)
        conn = agent_connection(user_params, database, dialect)
    except BaseException as exc:
        # Both IF EXISTS: whatever the batch got to. A database that already existed is not ours.
        existed = isinstance(exc, load_pymysql().err.MySQLError) and error_code(exc) == ER_DB_CREATE_EXISTS
        try:
            drop_account(admin, account, [database] if create_database and not existed else [])
        except load_pymysql().err.MySQLError:
            logger.warning("could not clean up the half-created episode account %s (database %r)", account, database)
        raise
    return Account(account, user_params, database, conn, time.monotonic())


def agent_connection(params: ConnectParams, database: str, dialect: Dialect) -> Any:
    """A connection for an episode's user, set up as MySQL 8's sessions are (:class:`Dialect`).

    Raises:
        BackendUnavailableError: the login failed, or the server refused the settings.
    """
    # The collation rides on the SET NAMES pymysql sends anyway, the rest on its init command
    # unless the server's defaults already are the dialect's: one or two round trips after
    # the login instead of four.
    return connect(params, database=database, collation=dialect.collation, init_command=dialect.connect_init_command)


def drop_account(admin: Any, account: str | None, databases: Iterable[str]) -> None:
    """Drop the user first (once it is gone nobody but us reaches the databases), then them,
    in one round trip on the ``multi_statements`` connection ``admin``.

    Raises:
        pymysql.err.MySQLError: a statement failed.
    """
    drop_accounts(admin, [account] if account is not None else [], databases)


def drop_accounts(admin: Any, accounts: Sequence[str], databases: Iterable[str]) -> None:
    """:func:`drop_account` for several accounts at once (one ``DROP USER`` for them all).

    Raises:
        pymysql.err.MySQLError: a statement failed.
    """
    statements = [f"DROP USER IF EXISTS {', '.join(accounts)}"] if accounts else []
    run_batch(admin, statements + [f"DROP DATABASE IF EXISTS {quote_mysql_identifier(d)}" for d in databases])


def reset_session(conn: Any, dialect: Dialect, limit: str | None = None) -> None:
    """Reset the account's connection to a fresh session, set up as MySQL 8's sessions are.

    ``COM_RESET_CONNECTION`` rolls back an open transaction, releases table locks and
    ``GET_LOCK`` named locks, drops temporary tables, forgets user variables and prepared
    statements and sets the session variables back to the server's globals; the
    collation (``SET NAMES``) and, on a server whose defaults are not MySQL 8's, the rest of
    the dialect are set again, and ``limit`` (the ``SET`` of a statement time limit, which
    the next episode's first statement then need not send). The login, its user and its
    default database stay.

    Raises:
        pymysql.err.MySQLError: the server refused (an old server) or the connection failed.
    """
    # pymysql has no public call for this command; _execute_command + _read_ok_packet is
    # how its own ping and select_db send theirs.
    conn._execute_command(COM_RESET_CONNECTION, b"")  # noqa: SLF001
    conn._read_ok_packet()  # noqa: SLF001
    # One SET for all (a SET takes NAMES and variables in one list): one round trip.
    settings = [] if dialect.server_defaults else [dialect.init_command.removeprefix("SET ")]
    if dialect.collation is not None:
        settings.append(f"NAMES utf8mb4 COLLATE {dialect.collation}")
    if limit is not None:
        settings.append(limit.removeprefix("SET "))
    if settings:
        with conn.cursor() as cur:
            cur.execute("SET " + ", ".join(settings))


def renew_account(admin: Any, account: Account, dialect: Dialect, limit: str | None) -> Account:
    """Make an ended episode's account ready for the next one, its session reset first
    (:func:`reset_session`, so the agent holds no lock the drop would wait for). ``limit``:
    the ``SET`` of the account's :attr:`Account.limit`, sent with the reset.

    - Its own database (an unnamed episode): dropped and created again, empty, under the
      same name (the grant on the name survives the drop; nothing else of the old one does).
    - A database the task named: every privilege of the account revoked (the one on that
      name, and any the server gave it on the agent's routines there), the database dropped,
      the grant given back on the account's home (:attr:`Account.home`, empty since the
      account was made) and the session moved there: the account can never reach a later
      episode's database of that name.

    Raises:
        pymysql.err.MySQLError: a statement failed; the caller drops the account instead.
    """
    reset_session(account.conn, dialect, limit)
    name = quote_mysql_identifier(account.database)
    if account.database == account.home:
        run_batch(admin, [f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name} {dialect.database_options}"])
    else:
        run_batch(admin, [f"REVOKE ALL PRIVILEGES, GRANT OPTION FROM {account.account}",
                          f"DROP DATABASE IF EXISTS {name}",
                          f"GRANT ALL PRIVILEGES ON {quote_mysql_identifier(grant_pattern(account.home))}.* "
                          f"TO {account.account}"])
        # The session's rights on its default database are looked up when it changes:
        # change it now, so nothing of the named database's stays with the session.
        account.conn.select_db(account.home)
    return replace(account, database=account.home, made_at=time.monotonic(),
                   limit=account.limit if limit is not None else None)


def restore_password_sql(account: str, password: str) -> str:
    """The admin statement that gives ``account`` its own password back (the agent may have
    changed it with ``SET PASSWORD``, which a user may do to itself by default)."""
    return f"ALTER USER {account} IDENTIFIED BY '{password}'"


def undo_account(admin: Any, account: Account | None, created: str | None) -> None:
    """Best-effort cleanup of a half-created episode on ``admin`` (None: the connection was
    lost): its account (and the spare's own database) and the database created for it."""
    databases = [name for name in (*((account.database, account.home) if account else ()), created)
                 if name is not None]
    if account is not None:
        close_quietly(account.conn)
    if admin is None:
        logger.warning("could not clean up half-created episode databases %s: the connection was lost",
                       ", ".join(databases))
        return
    try:
        drop_account(admin, account.account if account else None, list(dict.fromkeys(databases)))
    except load_pymysql().err.MySQLError:
        logger.warning("could not clean up half-created episode databases %s", ", ".join(databases))
