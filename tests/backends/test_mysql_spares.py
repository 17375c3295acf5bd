"""The MySQL backend's warm spare: accounts made ahead, ended episodes dropped behind.

Against real servers: a networked MariaDB reached by DSN (whose databases and users outlive
the backend, so a leak shows), and our container. The watchdog thread and the commit rule are
unit-tested without a server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from agentunit_gym.backends.sql.base import Column, TableData
from agentunit_gym.backends.sql.mysql import MySQLBackend, connect, parse_dsn
from agentunit_gym.backends.sql.mysql import spares as spares_module
from agentunit_gym.backends.sql.mysql.episode import needs_commit
from agentunit_gym.backends.sql.mysql.statement import Killer
from agentunit_gym.errors import BackendTimeoutError, ConfigError
from tests.backends.external_mysql import tcp_mariadb
from tests.waiting import wait_until

T = TableData("t", (Column("a"), Column("b")), (("1", "x"), ("2", None)))


def _server_state(dsn: str) -> tuple[set[str], set[str]]:
    """Databases and user names on the server, seen from a connection of our own."""
    conn = connect(parse_dsn(dsn))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            databases = {row[0] for row in cur.fetchall()}
            cur.execute("SELECT user FROM mysql.user")
            return databases, {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def dsn_server() -> Iterator[str]:
    with tcp_mariadb() as (dsn, _container):
        yield dsn


@pytest.fixture(scope="module")
def mysql() -> Iterator[MySQLBackend]:
    backend = MySQLBackend()
    yield backend
    backend.close()


@pytest.mark.docker
def test_spares_and_drops_leave_nothing_on_a_dsn_server(dsn_server: str) -> None:
    before = _server_state(dsn_server)
    backend = MySQLBackend(dsn=dsn_server, spares=2)
    try:
        backend.settle()
        spare_dbs, spare_users = backend.spare_names()
        assert len(spare_dbs) == len(spare_users) == 2
        databases, users = _server_state(dsn_server)
        assert databases == before[0] | set(spare_dbs) and users == before[1] | set(spare_users)
        for i in range(20):
            db = backend.open_episode([T])
            assert db.execute(f"UPDATE t SET b = 'y{i}' WHERE a = '1'").rowcount == 1
            db.close()
        for _ in range(3):  # the same name again at once: its drop is waited for
            db = backend.open_episode([T], database="named_again")
            assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
            db.execute("INSERT INTO t VALUES ('3', 'z')")
            db.close()
        with pytest.raises(ConfigError, match="rejected"):
            backend.open_episode([TableData("bad", (Column("a", "INT"),), (("not a number",),))])
        with pytest.raises(ConfigError, match="rejected"):
            backend.open_episode([TableData("bad", (Column("a", "INT"),), (("nan",),))], database="named_bad")
        left_open = backend.open_episode([T])
        named_open = backend.open_episode([T], database="named_open")
    finally:
        backend.close()
    assert left_open.closed and named_open.closed
    assert _server_state(dsn_server) == before


@pytest.mark.docker
def test_a_spare_made_too_late_is_dropped_too(dsn_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The caller stops waiting for the spare at once and makes its own account; the spare,
    # made later, must not stay on the server.
    slow = spares_module.create_account
    made_late = threading.Event()  # set once every episode has made its own account

    def slow_create(*args: Any, **kwargs: Any) -> spares_module.Account:
        assert made_late.wait(60), "the episodes did not end"
        return slow(*args, **kwargs)

    monkeypatch.setattr(spares_module, "SPARE_WAIT_S", 0.0)
    monkeypatch.setattr(spares_module, "create_account", slow_create)
    before = _server_state(dsn_server)
    backend = MySQLBackend(dsn=dsn_server)
    try:
        for _ in range(3):
            db = backend.open_episode([T])
            assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
            db.close()
    finally:
        made_late.set()
        backend.close()
    assert _server_state(dsn_server) == before


@pytest.mark.docker
def test_the_episode_is_the_spare_and_reaches_only_its_own_database(mysql: MySQLBackend) -> None:
    mysql.settle()
    (spare_db, next_db), (spare_user, next_user) = mysql.spare_names()  # two ready by default
    db = mysql.open_episode([T])
    try:
        assert db.name == spare_db
        assert db.execute("SELECT CURRENT_USER()").rows[0][0].startswith(f"{spare_user}@")
        mysql.settle()
        assert mysql.spare_names() == ([next_db], [next_user])  # replaced when the episode ends
        assert sorted(db.execute("SHOW DATABASES").rows) == sorted([(db.name,), ("information_schema",)])
        assert db.execute(f"SELECT 1 FROM `{next_db}`.t").error is not None
        grants = " ".join(row[0] for row in db.execute("SHOW GRANTS").rows)
        assert next_db.replace("_", "\\_") not in grants and db.name.replace("_", "\\_") in grants
    finally:
        db.close()
    mysql.settle()
    dbs, users = mysql.spare_names()
    # A new spare is made when the episode ends, and the ended episode's account comes back
    # behind it, renewed (tests/backends/test_mysql_reuse.py): three in turn, each renewed
    # while two episodes run.
    assert len(dbs) == len(users) == 3
    assert dbs[0] == next_db and dbs[2] == spare_db and users[0] == next_user and users[2] == spare_user


@pytest.mark.docker
def test_a_named_episode_takes_the_spare_user_and_cannot_reach_its_home(mysql: MySQLBackend) -> None:
    mysql.settle()
    spare_dbs, spare_users = mysql.spare_names()
    spare_db, spare_user = spare_dbs[0], spare_users[0]
    db = mysql.open_episode([T], database="cities_named")
    try:
        assert db.execute("SELECT CURRENT_USER()").rows[0][0].startswith(f"{spare_user}@")
        assert db.execute("SELECT DATABASE()").rows == (("cities_named",),)
        grants = " ".join(row[0] for row in db.execute("SHOW GRANTS").rows)
        assert "cities\\_named" in grants and spare_db.replace("_", "\\_") not in grants
        # The account's home stays on the server, empty, out of the agent's reach.
        assert "denied" in (db.execute(f"CREATE TABLE `{spare_db}`.x (a INT)").error or "")
        assert "denied" in (db.execute(f"USE `{spare_db}`").error or "")
        databases = {row[0] for row in db.admin_query("SHOW DATABASES").rows}
        assert spare_db in databases and "cities_named" in databases
        assert db.admin_query(f"SHOW TABLES FROM `{spare_db}`").rows == ()
    finally:
        db.close()
    mysql.settle()
    # Renewed: the account is a spare again, on its home; the named database is gone.
    dbs, users = mysql.spare_names()
    assert (spare_db, spare_user) in set(zip(dbs, users, strict=True))
    conn = connect(mysql.admin_connect_params())
    with conn.cursor() as cur:
        cur.execute("SHOW DATABASES LIKE 'cities\\_named'")
        assert cur.fetchall() == ()
    conn.close()


@pytest.mark.docker
def test_without_spares_everything_happens_in_the_call() -> None:
    workers_before = _spare_workers()
    backend = MySQLBackend(spares=0)
    try:
        assert backend.spare_names() == ([], [])
        db = backend.open_episode([T], database="no_spares")
        name, user = db.name, db.user
        db.close()
        conn = connect(backend.admin_connect_params())
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            assert (name,) not in cur.fetchall()
            cur.execute("SELECT CONCAT('''', user, '''@''', host, '''') FROM mysql.user")
            assert (user,) not in cur.fetchall()
        conn.close()
        assert _spare_workers() <= workers_before  # no worker thread of its own
    finally:
        backend.close()


def _spare_workers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("agentunit-gym-mysql-spares")}


def test_negative_spares_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="spares"):
        MySQLBackend(spares=-1)


# -- the KILL QUERY watchdog, without a server ---------------------------------------------


@pytest.fixture()
def killer(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Killer, list[int]]]:
    killed: list[int] = []
    monkeypatch.setattr(Killer, "kill", lambda self, thread_id, *, query_only: killed.append(thread_id) or True)
    watchdog_killer = Killer(parse_dsn("mysql://nobody@127.0.0.1:1/"))
    yield watchdog_killer, killed
    watchdog_killer.close()


def test_an_overrun_statement_is_killed_at_its_deadline(killer: tuple[Killer, list[int]]) -> None:
    watchdogs, killed = killer
    start = time.monotonic()
    late = watchdogs.arm(7, 600.0)
    early = watchdogs.arm(8, 0.05)  # earlier than the thread's wake-up: it must be woken
    wait_until(lambda: killed, 30, "the early statement to be killed")
    assert killed == [8] and early.fired and not late.fired
    assert time.monotonic() - start >= 0.05  # not before its deadline
    early.disarm()
    late.disarm()


def test_a_disarmed_statement_is_never_killed_and_no_thread_is_made_per_statement(
        killer: tuple[Killer, list[int]]) -> None:
    watchdogs, killed = killer
    watchdogs.arm(1, 10.0).disarm()  # starts the one thread
    threads = threading.active_count()
    for i in range(200):
        watchdogs.arm(i, 0.1).disarm()
    assert threading.active_count() == threads
    # A statement due after all of them: once it is killed, their deadlines have passed too.
    after = watchdogs.arm(1000, 0.2)
    wait_until(lambda: killed, 30, "the statement due after the disarmed ones to be killed")
    assert killed == [1000] and after.fired


def test_closing_the_killer_stops_its_thread(killer: tuple[Killer, list[int]]) -> None:
    watchdogs, _killed = killer
    watchdogs.arm(1, 10.0).disarm()
    thread = watchdogs._thread
    assert thread is not None and thread.is_alive()
    watchdogs.close()
    assert not thread.is_alive()


class _Conn:
    def __init__(self, status: int | None) -> None:
        self.server_status = status


@pytest.mark.parametrize(("status", "expected"), [
    (2, False),      # autocommit, no transaction: nothing to commit
    (3, True),       # autocommit, START TRANSACTION open
    (0, True),       # SET autocommit = 0: every statement is committed, as AgentBench does
    (1, True),
    (None, True),    # unknown: commit
])
def test_a_commit_is_sent_only_when_a_transaction_may_be_open(status: int | None, expected: bool) -> None:
    assert needs_commit(_Conn(status)) is expected


@pytest.mark.docker
def test_with_autocommit_off_a_read_is_committed_too(mysql: MySQLBackend) -> None:
    # A SELECT opens a snapshot; left open, the agent would not see the grader's later change.
    db = mysql.open_episode([T])
    try:
        assert db.execute("SET autocommit = 0").ok
        assert db.execute("SELECT b FROM t WHERE a = '1'").rows == (("x",),)
        assert db.admin_query("UPDATE t SET b = 'changed' WHERE a = '1'").ok
        assert db.execute("SELECT b FROM t WHERE a = '1'").rows == (("changed",),)
        assert db.execute("START TRANSACTION").ok
        assert db.execute("SELECT b FROM t WHERE a = '2'").ok
        assert db.admin_query("UPDATE t SET b = 'again' WHERE a = '1'").ok
        assert db.execute("SELECT b FROM t WHERE a = '1'").rows == (("again",),)
    finally:
        db.close()


@pytest.mark.docker
def test_a_table_too_big_for_one_round_trip_loads_in_several(mysql: MySQLBackend,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.backends.sql.mysql import loading as loading_module

    rows = tuple((str(i), "é'\\;" * (i % 7), None if i % 5 else "n") for i in range(300))
    table = TableData("big", (Column("i", "INT"), Column("s"), Column("n")), rows)
    reference = mysql.open_episode([table])
    try:
        expected = reference.table_hash("big", ["i", "s", "n"])
    finally:
        reference.close()
    monkeypatch.setattr(loading_module, "BATCH_CHARS", 120)  # a few rows per INSERT, one INSERT per batch
    db = mysql.open_episode([table, T], database="big_in_pieces")
    try:
        assert db.execute("SELECT COUNT(*), SUM(i) FROM big").rows == ((300, sum(range(300))),)
        assert db.table_hash("big", ["i", "s", "n"]) == expected
        assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
    finally:
        db.close()


@pytest.mark.docker
def test_our_image_s_defaults_spare_the_session_setup_and_a_stock_server_gets_it(mysql: MySQLBackend,
                                                                                 dsn_server: str) -> None:
    assert mysql.dialect.server_defaults and mysql.dialect.connect_init_command is None
    stock = MySQLBackend(dsn=dsn_server, spares=0)
    try:
        assert not stock.dialect.server_defaults and stock.dialect.connect_init_command == stock.dialect.init_command
        for backend in (mysql, stock):
            db = backend.open_episode([T])
            try:
                ((mode, length, collation),) = db.execute(
                    "SELECT @@SESSION.sql_mode, @@SESSION.group_concat_max_len, @@collation_connection").rows
                assert set(mode.split(",")) == set(backend.dialect.sql_mode.split(","))
                assert (length, collation) == (1024, backend.dialect.collation)
            finally:
                db.close()
    finally:
        stock.close()


def test_a_named_reopen_that_outwaits_the_drop_of_its_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # A renewal still dropping `cities` past the wait: creating the name now could lose the
    # new database to that renewal's cleanup if it then failed, so the reopen is refused.
    pool = object.__new__(spares_module.SparePool)
    pool._lock = threading.Lock()  # noqa: SLF001
    pool._backlog = []  # noqa: SLF001
    pool._drops = {"cities": Future()}  # noqa: SLF001
    pool._describe = lambda: "the test server"  # noqa: SLF001
    monkeypatch.setattr(spares_module, "SPARE_WAIT_S", 0.05)
    with pytest.raises(BackendTimeoutError, match="'cities'.*still being dropped on the test server"):
        pool.wait_dropped("cities")
    done: Future[None] = Future()
    done.set_exception(RuntimeError("the drop failed"))
    pool._drops = {"cities": done}  # noqa: SLF001
    pool.wait_dropped("cities")  # done, even if it failed: CREATE DATABASE says whether the name is free
