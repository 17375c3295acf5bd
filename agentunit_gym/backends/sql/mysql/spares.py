"""Episode accounts made ahead and dropped behind, off the episode's critical path.

An episode needs a database, a user that holds privileges on that database only, and a
connection of that user set up as MySQL 8's sessions are: five round trips and a login that
do not depend on the task. :class:`SparePool` makes them on a worker thread, with its own
admin connection, while the env runs the current episode (as the local sandbox starts its
warm spare), and drops ended episodes there too, the way the local sandbox deletes an old
box's files in the background. An ended episode of an unnamed database gives its account
back (:meth:`SparePool.give_back`): the worker resets the session and empties the database
(:mod:`.accounts`), so back-to-back episodes make no user, grant or login at all. An episode
of a database its task named gives its account back too: the worker revokes the account's
privileges, drops that database and grants the account its own (empty) one again. Isolation is
unchanged: a spare's user can reach only the spare's own database, and a database is dropped
only after its user (and so the agent) can no longer reach it, or, renewed, after the
session that used it was reset.

Every wait has a deadline: taking a spare waits at most :data:`SPARE_WAIT_S` (then the
backend makes the account itself), closing at most :data:`CLOSE_WAIT_S` for the worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from contextlib import contextmanager
from typing import Any, TypeVar

from agentunit_gym.backends.sql.mysql.accounts import (
    Account,
    create_account,
    drop_accounts,
    open_admin,
    renew_account,
    unique_database_name,
)
from agentunit_gym.backends.sql.mysql.connection import (
    ConnectParams,
    close_quietly,
    is_connection_error,
    load_pymysql,
)
from agentunit_gym.backends.sql.mysql.dialect import Dialect
from agentunit_gym.backends.sql.mysql.statement import limit_statement
from agentunit_gym.errors import BackendTimeoutError, BackendUnavailableError

logger = logging.getLogger("agentunit_gym")

SPARE_WAIT_S = 10.0
"""Longest wait for a spare still being made; past it the backend makes the account itself."""
CLOSE_WAIT_S = 30.0
"""Longest wait, on close, for the worker's queued drops and spares."""
QUIET_WAIT_S = 0.25
"""Longest the worker holds a drop back while the caller loads an episode's tables."""
DROP_BATCH = 8
"""Ended episodes are dropped in batches of this many (one round trip, and the server's DDL
kept out of the next episodes' way); :meth:`SparePool.settle` drops the rest at once."""
FRESH_S = 30.0
"""A spare older than this is pinged before use (the server may have dropped an idle login)."""

_T = TypeVar("_T")


class SparePool:
    """Makes episode accounts ahead and drops ended ones, on one worker thread.

    Args:
        params: the admin's connect parameters; the worker opens its own admin connection.
        dialect: the session settings of the accounts' connections.
        size: how many spares to keep ready (at least 1); taken ones are replaced when an
            episode ends (:meth:`refill`), or at once when none is left.
        describe: the server's description, for log messages.
        flavor: ``"mariadb"`` or ``"mysql"`` (how a statement time limit is set).
    """

    def __init__(self, params: ConnectParams, dialect: Dialect, size: int, describe: Callable[[], str],
                 flavor: str = "mariadb") -> None:
        self._params = params
        self._flavor = flavor
        self._dialect = dialect
        self._size = max(1, size)
        self._describe = describe
        self._lock = threading.Lock()
        self._ready: deque[Future[Account]] = deque()
        self._drops: dict[str, Future[Any]] = {}
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

    def give_back(self, account: Account) -> None:
        """Take back an ended episode's account: the worker resets its session and empties its
        database, or gives it its home back after a named database
        (:func:`.accounts.renew_account`), and it is a spare again (one more than the pool's
        size at most, so that a pool of one reuses too; past that it is dropped). If renewing
        fails, the worker drops it and makes a new account in its place."""
        databases = list(dict.fromkeys([account.database, account.home]))
        with self._lock:
            keep = not self._closed and len(self._ready) <= self._size
            if keep:
                try:
                    future = self._worker.submit(self._renew, account)
                except RuntimeError:  # the worker was shut down
                    keep = False
                else:
                    self._pending.add(future)
                    self._ready.append(future)
                    if account.database != account.home:
                        self._drops[account.database] = future  # wait_dropped waits for the renewal
        if not keep:
            self.drop_later(account, databases)
            return
        future.add_done_callback(self._done)
        if account.database != account.home:
            future.add_done_callback(lambda done: self._forget_drop(done, [account.database]))

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
        the name can be created again.

        Raises:
            BackendTimeoutError: the drop (or the renewal that drops it) was still running:
                creating the name now could lose the new database to that task's cleanup.
        """
        with self._lock:
            waiting = any(database in names for _, names in self._backlog)
        if waiting:
            self._flush()
        with self._lock:
            future = self._drops.get(database)
        if future is not None:
            try:
                future.result(timeout=SPARE_WAIT_S)
            except FutureTimeoutError as exc:
                raise BackendTimeoutError(f"database {database!r} of an ended episode was still being dropped "
                                          f"on {self._describe()} after {SPARE_WAIT_S:g} s; open the episode "
                                          "again later") from exc
            except Exception as exc:  # noqa: BLE001 - done: then CREATE DATABASE says if the name is taken
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

    def _forget_drop(self, future: Future[Any], databases: list[str]) -> None:
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

    def _renew(self, account: Account) -> Account:
        try:
            limit = limit_statement(self._flavor, account.limit) if account.limit is not None else None
            return self._with_admin(lambda admin: renew_account(admin, account, self._dialect, limit),
                                    hold_back=True)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the account is dropped, never kept half-renewed
            logger.debug("could not renew episode account %s (%s); making a new one", account.account, exc)
        close_quietly(account.conn)
        self._drop([account.account], list(dict.fromkeys([account.database, account.home])))
        return self._make()

    def _drop(self, accounts: list[str], databases: list[str]) -> None:
        try:
            self._with_admin(lambda admin: drop_accounts(admin, accounts, databases), hold_back=True)
        except (load_pymysql().err.MySQLError, BackendUnavailableError) as exc:
            # A container takes its databases with it; a DSN server keeps them, so say so.
            logger.warning("could not drop episode accounts %s and databases %s on %s: %s", ", ".join(accounts),
                           ", ".join(databases), self._describe(), exc)
