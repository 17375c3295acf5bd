"""Episode accounts made ahead and dropped behind, off the episode's critical path.

An episode needs a database, a user that holds privileges on that database only, and a
connection of that user set up as MySQL 8's sessions are: five round trips and a login that
do not depend on the task. :class:`SparePool` makes them on a worker thread, with its own
admin connection, while the env runs the current episode (as the local sandbox starts its
warm spare), and drops ended episodes there too, the way the local sandbox deletes an old
box's files in the background. Isolation is unchanged: a spare's user can reach only the
spare's own database, and a database is dropped only after its user (and so the agent) can no
longer reach it.

Every wait has a deadline: taking a spare waits at most :data:`SPARE_WAIT_S` (then the
backend makes the account itself), closing at most :data:`CLOSE_WAIT_S` for the worker.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from agentunit_gym.backends.sql.hashing import quote_mysql_identifier
from agentunit_gym.backends.sql.mysql.connection import (
    ER_DB_CREATE_EXISTS,
    ConnectParams,
    close_quietly,
    connect,
    error_code,
    is_connection_error,
    load_pymysql,
    run_batch,
)
from agentunit_gym.backends.sql.mysql.dialect import Dialect
from agentunit_gym.errors import BackendUnavailableError

logger = logging.getLogger("agentunit_gym")

SPARE_WAIT_S = 10.0
"""Longest wait for a spare still being made; past it the backend makes the account itself."""
CLOSE_WAIT_S = 30.0
"""Longest wait, on close, for the worker's queued drops and spares."""
ADMIN_LOCK_WAIT_S = 5
"""Seconds an admin session waits for a lock the agent holds before its statement fails."""
QUIET_WAIT_S = 0.25
"""Longest the worker holds a drop back while the caller loads an episode's tables."""
DROP_BATCH = 8
"""Ended episodes are dropped in batches of this many (one round trip, and the server's DDL
kept out of the next episodes' way); :meth:`SparePool.settle` drops the rest at once."""
FRESH_S = 30.0
"""A spare older than this is pinged before use (the server may have dropped an idle login)."""

_T = TypeVar("_T")


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


class SparePool:
    """Makes episode accounts ahead and drops ended ones, on one worker thread.

    Args:
        params: the admin's connect parameters; the worker opens its own admin connection.
        dialect: the session settings of the accounts' connections.
        size: how many spares to keep ready (at least 1); taken ones are replaced when an
            episode ends (:meth:`refill`), or at once when none is left.
        describe: the server's description, for log messages.
    """

    def __init__(self, params: ConnectParams, dialect: Dialect, size: int, describe: Callable[[], str]) -> None:
        self._params = params
        self._dialect = dialect
        self._size = max(1, size)
        self._describe = describe
        self._lock = threading.Lock()
        self._ready: deque[Future[Account]] = deque()
        self._drops: dict[str, Future[None]] = {}
        self._pending: set[Future[Any]] = set()
        self._late: list[Future[Account]] = []  # spares whose taker gave up waiting
        self._backlog: list[tuple[str | None, list[str]]] = []  # ended accounts not yet handed to the worker
        self._closed = False
        self._quiet = threading.Event()  # clear while the caller loads an episode's tables
        self._quiet.set()
        self._admin: Any = None  # the worker thread's own connection, used on that thread only
        self._admin_used = 0.0
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentunit-gym-mysql-spares")
        self._fill()

    # -- the caller's side ------------------------------------------------------------

    def take(self) -> Account | None:
        """A ready account (waiting for one being made, within :data:`SPARE_WAIT_S`), else None."""
        with self._lock:
            future = self._ready.popleft() if self._ready else None
            empty = not self._ready
        if empty:
            self._fill()  # else the refill waits for the episode's end (refill)
        if future is None:
            return None
        try:
            account = future.result(timeout=SPARE_WAIT_S)
        except FutureTimeoutError:
            logger.warning("no spare episode account within %g s on %s; making one now", SPARE_WAIT_S,
                           self._describe())
            with self._lock:
                self._late.append(future)  # dropped once made (by a later _fill, or by close)
            return None
        except Exception as exc:  # noqa: BLE001 - any failure of a spare means: make the account now
            logger.debug("spare episode account unusable (%s); making one now", exc)
            return None
        if time.monotonic() - account.made_at > FRESH_S:
            try:
                account.conn.ping(reconnect=False)
            except load_pymysql().err.MySQLError as exc:
                logger.debug("spare episode account's connection went stale (%s); making one now", exc)
                self.drop_later(account, [account.database])
                return None
        return account

    def drop_later(self, account: Account | None, databases: list[str], *, user: str | None = None) -> None:
        """Close the account's connection now; drop the user and ``databases`` on the worker,
        with the next :data:`DROP_BATCH` - 1 others (or sooner: :meth:`settle`, :meth:`close`,
        :meth:`wait_dropped`)."""
        if account is not None:
            close_quietly(account.conn)
            user = account.account
        with self._lock:
            self._backlog.append((user, list(databases)))
            full = len(self._backlog) >= DROP_BATCH
        if full:
            self._flush()

    def _flush(self) -> None:
        """Hand the backlog of drops to the worker, as one batch."""
        with self._lock:
            backlog, self._backlog = self._backlog, []
        if not backlog:
            return
        accounts = [user for user, _ in backlog if user is not None]
        databases = [database for _, names in backlog for database in names]
        future = self._submit(self._drop, accounts, databases, closing=True)
        if future is None:
            return
        with self._lock:
            for database in databases:
                self._drops[database] = future
        future.add_done_callback(lambda done: self._forget_drop(done, databases))

    def refill(self) -> None:
        """Make spares up to the pool's size. Called when an episode ends: the worker then
        works between episodes, while the agent of the next one thinks, not during them."""
        self._fill()

    @contextmanager
    def loading(self) -> Iterator[None]:
        """Around the caller's table loading: the worker starts no drop meanwhile (for at most
        :data:`QUIET_WAIT_S`)."""
        self._quiet.clear()
        try:
            yield
        finally:
            self._quiet.set()

    def wait_dropped(self, database: str) -> None:
        """Wait (at most :data:`SPARE_WAIT_S`) until a queued drop of ``database`` has run, so
        the name can be created again."""
        with self._lock:
            waiting = any(database in names for _, names in self._backlog)
        if waiting:
            self._flush()
        with self._lock:
            future = self._drops.get(database)
        if future is not None:
            try:
                future.result(timeout=SPARE_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - then CREATE DATABASE says the name is taken
                logger.warning("waiting for database %r to be dropped: %s", database, exc)

    def settle(self, timeout: float) -> bool:
        """Wait until the queued drops and spares are done; False if ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        self._flush()
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                return True
            for future in pending:
                try:
                    future.result(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeoutError:
                    return False
                except Exception:  # noqa: BLE001, S110 - a failed task is done; its failure was logged
                    pass

    def spare_names(self) -> tuple[list[str], list[str]]:
        """The databases and user names of the spares ready now (for tools and tests)."""
        with self._lock:
            ready = [f.result() for f in self._ready if f.done() and f.exception() is None]
        return [a.database for a in ready], [a.params.user for a in ready]

    def close(self) -> None:
        """Drop the spares and run the queued drops (within :data:`CLOSE_WAIT_S`), stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unused, self._ready, self._late = [*self._ready, *self._late], deque(), []
        deadline = time.monotonic() + CLOSE_WAIT_S
        for future in unused:
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001, S110 - a spare that failed or is late has nothing to drop yet
                pass
        self._drop_unused(unused)
        if not self.settle(max(0.0, deadline - time.monotonic())):
            logger.warning("episode accounts on %s were still being made or dropped after %g s; "
                           "some may be left behind", self._describe(), CLOSE_WAIT_S)
        self._worker.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            idle = not self._pending
        if idle:  # else the worker still uses it; its read timeout ends that
            close_quietly(self._admin)
            self._admin = None

    # -- the worker's side ------------------------------------------------------------

    def _submit(self, fn: Callable[..., _T], *args: Any, closing: bool = False) -> Future[_T] | None:
        with self._lock:
            if self._closed and not closing:
                return None
            try:
                future = self._worker.submit(fn, *args)
            except RuntimeError:  # the worker was shut down
                return None
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _forget_drop(self, future: Future[None], databases: list[str]) -> None:
        with self._lock:
            for database in databases:
                if self._drops.get(database) is future:
                    del self._drops[database]

    def _fill(self) -> None:
        with self._lock:
            late = [f for f in self._late if f.done()]
            self._late = [f for f in self._late if not f.done()]
        self._drop_unused(late)
        while True:
            with self._lock:
                if self._closed or len(self._ready) >= self._size:
                    return
                try:
                    future = self._worker.submit(self._make)
                except RuntimeError:  # the worker was shut down
                    return
                self._pending.add(future)
                self._ready.append(future)
            future.add_done_callback(self._done)

    def _drop_unused(self, futures: list[Future[Account]]) -> None:
        """Drop the spares among ``futures`` that were made (nobody will use them)."""
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is None:
                account = future.result()
                close_quietly(account.conn)
                self._submit(self._drop, [account.account], [account.database], closing=True)

    def _with_admin(self, fn: Callable[[Any], _T], *, hold_back: bool = False) -> _T:
        """Run ``fn`` on the worker's admin connection (pinged first after :data:`FRESH_S` idle;
        opened again after a connection error)."""
        if hold_back:
            # Dropping tables and creating them both take InnoDB's data dictionary: let the
            # caller's table loading go first, for a bounded time. (Making an account touches
            # no InnoDB table, so it runs alongside.)
            self._quiet.wait(QUIET_WAIT_S)
        pymysql = load_pymysql()
        if self._admin is not None and time.monotonic() - self._admin_used > FRESH_S:
            try:
                self._admin.ping(reconnect=False)
            except pymysql.err.MySQLError:
                close_quietly(self._admin)
                self._admin = None
        if self._admin is None:
            self._admin = open_admin(self._params, multi_statements=True)
        try:
            result = fn(self._admin)
        except pymysql.err.MySQLError as exc:
            if is_connection_error(exc):
                close_quietly(self._admin)
                self._admin = None  # the next task opens a new one
            raise
        self._admin_used = time.monotonic()
        return result

    def _make(self) -> Account:
        return self._with_admin(lambda admin: create_account(admin, self._params, self._dialect,
                                                             unique_database_name(), create_database=True))

    def _drop(self, accounts: list[str], databases: list[str]) -> None:
        try:
            self._with_admin(lambda admin: drop_accounts(admin, accounts, databases), hold_back=True)
        except (load_pymysql().err.MySQLError, BackendUnavailableError) as exc:
            # A container takes its databases with it; a DSN server keeps them, so say so.
            logger.warning("could not drop episode accounts %s and databases %s on %s: %s", ", ".join(accounts),
                           ", ".join(databases), self._describe(), exc)
