"""An ended episode's account serves a later episode: nothing of the first reaches the second.

The worker renews an account (``COM_RESET_CONNECTION`` on the agent's connection, then the
database dropped and created again under the same name). Each test leaves something behind in
one episode, then takes the same account, on the same connection, in a later one and checks
that the leftover is gone and harmless. Every one of them fails if the session is not reset
(checked by making :func:`~agentunit_gym.backends.sql.mysql.accounts.reset_session` a no-op)
or, for the password, if a failed login does not restore the account's password.
Against our MariaDB container and a networked MariaDB reached by DSN (for the leak count).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sql.base import Column, TableData
from agentunit_gym.backends.sql.mysql import MySQLBackend, connect, parse_dsn
from agentunit_gym.backends.sql.mysql.accounts import reset_session
from agentunit_gym.backends.sql.mysql.dialect import MARIADB_COLLATION, MARIADB_SQL_MODE, Dialect
from agentunit_gym.backends.sql.mysql.episode import MySQLEpisode
from tests.backends.external_mysql import admin_rows, tcp_mariadb

pytestmark = pytest.mark.docker

T = TableData("t", (Column("a"), Column("b")), (("1", "x"), ("2", None)))


@pytest.fixture(scope="module")
def mysql() -> Iterator[MySQLBackend]:
    backend = MySQLBackend()
    yield backend
    backend.close()


def reopen(backend: MySQLBackend, first: MySQLEpisode, connection_id: int) -> MySQLEpisode:
    """A later episode on ``first``'s account and connection (the spares are taken in turn)."""
    for _ in range(4):
        backend.settle()
        db = backend.open_episode([T])
        if db.user == first.user:
            assert db.name == first.name and db.connection_id == connection_id  # reused, no new login
            return db
        db.close()
    raise AssertionError(f"the account {first.user} did not come back within 4 episodes")


def test_a_changed_password_does_not_lock_the_next_episode_out(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("SET PASSWORD = PASSWORD('the agent knows this one')").ok
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
        # A new login (after the agent ended its own connection) needs the account's own
        # password: it is restored, and the login goes through.
        killed = db.execute("KILL CONNECTION_ID()")
        assert killed.error is not None and "new connection" in killed.error
        assert db.connection_id != connection_id
        assert db.execute("SELECT a FROM t ORDER BY a").rows == (("1",), ("2",))
    finally:
        db.close()


def test_a_named_lock_is_released_with_the_episode(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("SELECT GET_LOCK('agentunit_leftover', 0)").rows == ((1,),)
    first.close()
    mysql.settle()
    # Named locks are server-wide: held on, it would block every episode that takes it.
    assert admin_rows(mysql, "SELECT IS_USED_LOCK('agentunit_leftover')") == [(None,)]
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT IS_USED_LOCK('agentunit_leftover')").rows == ((None,),)
    finally:
        db.close()


def test_a_temporary_table_does_not_shadow_the_next_task(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("CREATE TEMPORARY TABLE t (a TEXT, b TEXT)").ok
    assert first.execute("INSERT INTO t VALUES ('forged', 'forged')").ok
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT a, b FROM t ORDER BY a").rows == (("1", "x"), ("2", None))
    finally:
        db.close()


def test_user_variables_and_prepared_statements_are_forgotten(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("SET @answer = 'from the last episode'").ok
    assert first.execute("PREPARE leftover FROM 'SELECT 42'").ok
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT @answer").rows == ((None,),)
        assert "Unknown prepared statement" in (db.execute("EXECUTE leftover").error or "")
    finally:
        db.close()


def test_session_variables_are_back_to_mysql_8s(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("SET SESSION sql_mode = '', group_concat_max_len = 5, autocommit = 0").ok
    assert first.execute("SET NAMES utf8mb4 COLLATE utf8mb4_bin").ok
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT @@sql_mode, @@group_concat_max_len, @@autocommit, @@collation_connection").rows \
            == ((MARIADB_SQL_MODE, 1024, 1, MARIADB_COLLATION),)
        assert db.execute("SELECT 'A' = 'a'").rows == ((1,),)  # case-insensitive again
    finally:
        db.close()


def test_an_open_transaction_and_table_lock_end_with_the_episode(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    assert first.execute("LOCK TABLES t WRITE").ok
    assert first.execute("SET autocommit = 0").ok
    assert first.execute("INSERT INTO t VALUES ('3', 'uncommitted?')").ok
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SELECT COUNT(*) FROM t").rows == ((2,),)  # a fresh task table
        assert db.execute("INSERT INTO t VALUES ('3', 'y')").ok  # no lock left on it
        assert db.table_hash("t", ["a", "b"]) != ""
    finally:
        db.close()


def test_database_objects_go_with_the_database(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    for sql in ("CREATE VIEW v AS SELECT a FROM t",
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.b = 'trigger'",
                "CREATE PROCEDURE p() SELECT 1",
                "CREATE EVENT e ON SCHEDULE EVERY 1 SECOND DO INSERT INTO t VALUES ('event', NULL)",
                "CREATE TABLE extra (x INT)"):
        assert first.execute(sql).ok, sql
    first.close()
    mysql.settle()
    # The scheduler is off on our image: an event never runs, and goes with its database.
    assert admin_rows(mysql, "SELECT @@GLOBAL.event_scheduler") == [("OFF",)]
    for table in ("routines WHERE routine_schema", "events WHERE event_schema", "triggers WHERE trigger_schema"):
        assert admin_rows(mysql, f"SELECT COUNT(*) FROM information_schema.{table} = '{first.name}'") == [(0,)]
    db = reopen(mysql, first, connection_id)
    try:
        assert db.execute("SHOW TABLES").rows == (("t",),)
        assert db.execute("INSERT INTO t VALUES ('3', 'mine')").ok
        assert db.execute("SELECT b FROM t WHERE a = '3'").rows == (("mine",),)
        grants = " ".join(row[0] for row in db.execute("SHOW GRANTS").rows)
        assert grants.count(" ON ") == 2 and f"`{first.name.replace('_', chr(92) + '_')}`.*" in grants
    finally:
        db.close()


def test_a_named_episodes_account_comes_back_without_any_right_on_that_name(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T], database="reuse_named")
    user, connection_id = first.user, first.connection_id
    # The server gives the creator of a routine rights on it (automatic_sp_privileges): the
    # renewal revokes every right of the account, not only its grant on the database.
    assert first.execute("CREATE PROCEDURE p() SELECT 'secret'").ok
    assert first.execute("SET @mine = 1").ok
    first.close()
    # A later episode of the same name, on another account, with a routine of the same name.
    second = mysql.open_episode([T], database="reuse_named")
    try:
        assert second.user != user
        assert second.execute("INSERT INTO t VALUES ('3', 'second''s row')").ok
        assert second.execute("CREATE PROCEDURE p() SELECT b FROM t WHERE a = '3'").ok
        for _ in range(4):
            mysql.settle()
            db = mysql.open_episode([T])
            if db.user == user:
                break
            db.close()
        else:
            raise AssertionError(f"the account {user} did not come back within 4 episodes")
        try:
            assert db.connection_id == connection_id  # renewed, not made again
            assert admin_rows(mysql, f"SELECT COUNT(*) FROM mysql.procs_priv WHERE User = '{db.params.user}'") \
                == [(0,)]
            # The session was moved off the name: a session keeps the rights it had on its
            # default database, so left there it would read and write the second episode's.
            assert db.name != "reuse_named" and db.execute("SELECT DATABASE()").rows == ((db.name,),)
            assert db.execute("SELECT b FROM t").rows == (("x",), (None,))
            assert db.execute("SELECT @mine").rows == ((None,),)
            assert "denied" in (db.execute("SELECT * FROM reuse_named.t").error or "")
            assert "denied" in (db.execute("CALL reuse_named.p()").error or "")
            assert "denied" in (db.execute("USE reuse_named").error or "")
            grants = [row[0] for row in db.execute("SHOW GRANTS").rows]
            assert len(grants) == 2 and "reuse" not in " ".join(grants)
            assert db.execute("SHOW TABLES").rows == (("t",),)
        finally:
            db.close()
    finally:
        second.close()


def test_reused_accounts_leave_nothing_on_a_dsn_server() -> None:
    with tcp_mariadb() as (dsn, _container):
        conn = connect(parse_dsn(dsn))

        def server_state() -> tuple[set[str], set[str]]:
            with conn.cursor() as cur:
                cur.execute("SHOW DATABASES")
                databases = {row[0] for row in cur.fetchall()}
                cur.execute("SELECT user FROM mysql.user")
                return databases, {row[0] for row in cur.fetchall()}

        try:
            before = server_state()
            backend = MySQLBackend(dsn=dsn)
            users = set()
            try:
                for i in range(12):
                    db = backend.open_episode([T])
                    users.add(db.user)
                    assert db.execute("CREATE TEMPORARY TABLE tmp (x INT)").ok
                    assert db.execute(f"SELECT GET_LOCK('l{i}', 0)").rows == ((1,),)
                    db.close()
            finally:
                backend.close()
            assert len(users) <= 3  # back to back, the same few accounts serve every episode
            assert server_state() == before
        finally:
            conn.close()


# -- the statement time limit: set only when it may have changed ---------------------------


def set_statements(db: MySQLEpisode, timeout: float) -> int:
    """How many SET statements the agent's session has run (a plain statement: it sets nothing)."""
    return int(db.execute("SHOW SESSION STATUS LIKE 'Com_set_option'", timeout=timeout).rows[0][1])


def test_the_time_limit_is_sent_again_only_when_it_may_have_changed(mysql: MySQLBackend) -> None:
    db = mysql.open_episode([T])
    try:
        base = set_statements(db, 10.0)
        for _ in range(3):
            assert db.execute("SELECT COUNT(*) FROM t", timeout=10.0).rows == ((2,),)
        assert db.execute("UPDATE t SET b = 'y' WHERE a = '1'", timeout=10.0).rowcount == 1
        assert set_statements(db, 10.0) == base  # plain statements, same limit: no SET before them
        db.execute("SELECT 1", timeout=3.0)
        assert set_statements(db, 3.0) == base + 1  # another limit: one SET
        assert db.execute("SET @x = 1", timeout=3.0).ok  # the agent's own SET (counted)...
        db.execute("SELECT 1", timeout=3.0)
        db.execute("SELECT 1", timeout=3.0)
        # ...after which the limit is set before every statement, for the rest of the episode.
        assert set_statements(db, 3.0) == base + 1 + 1 + 3
    finally:
        db.close()


@pytest.mark.parametrize("lift", [
    ["SET SESSION max_statement_time = 0"],
    ["/*! SET SESSION max_statement_time = 0 */"],
    ["CREATE PROCEDURE lift() SET SESSION max_statement_time = 0", "CALL lift()"],
    ["CREATE FUNCTION lift() RETURNS INT BEGIN SET SESSION max_statement_time = 0; RETURN 1; END",
     "SELECT lift()"],
    ["CREATE TABLE other (x INT)",
     "CREATE TRIGGER lift BEFORE INSERT ON other FOR EACH ROW SET SESSION max_statement_time = 0",
     "INSERT INTO other VALUES (1)"],
])
def test_the_agent_cannot_lift_the_time_limit(mysql: MySQLBackend, lift: list[str]) -> None:
    db = mysql.open_episode([T])
    try:
        db.execute("SELECT 1", timeout=1.0)
        for sql in lift:
            db.execute(sql, timeout=1.0)  # some servers refuse a SET in a function or trigger: fine
        result = db.execute("SELECT SLEEP(3)", timeout=1.0)
        # Ended by the server's own limit (error 1969), not by the watchdog half a second later
        # (its KILL QUERY ends a statement with error 1317): the errno says which, no clock needed.
        assert result.timed_out and result.extra.get("errno") == 1969, result
    finally:
        db.close()


def test_a_reset_session_gets_the_dialect_on_a_server_without_its_defaults(mysql: MySQLBackend) -> None:
    # A stock server's globals are not MySQL 8's: the reset sends them with the collation and
    # the time limit, in one SET (a dialect unlike our image's globals stands in for that).
    conn = connect(mysql.admin_connect_params())
    try:
        with conn.cursor() as cur:
            cur.execute("SET @left = 1, SESSION group_concat_max_len = 7")
        reset_session(conn, Dialect("ANSI_QUOTES", MARIADB_COLLATION, server_defaults=False),
                      "SET SESSION max_statement_time = 4.000")
        with conn.cursor() as cur:
            cur.execute("SELECT @@sql_mode, @@group_concat_max_len, @@collation_connection, "
                        "@@max_statement_time, @left")
            assert cur.fetchall() == (("ANSI_QUOTES", 1024, MARIADB_COLLATION, 4.0, None),)
    finally:
        conn.close()


def test_an_account_whose_connection_died_unseen_is_dropped_not_renewed(mysql: MySQLBackend) -> None:
    db = mysql.open_episode([T])
    admin_rows(mysql, f"KILL {db.connection_id}")  # the episode runs nothing after: it cannot know
    db.close()
    mysql.settle()
    # The renewal's reset failed: the account and its database are dropped, a new spare made.
    assert (db.name,) not in admin_rows(mysql, "SHOW DATABASES")
    assert db.user.split("'")[1] not in {row[0] for row in admin_rows(mysql, "SELECT user FROM mysql.user")}
    dbs, users = mysql.spare_names()
    assert len(dbs) == len(users) >= 2 and db.name not in dbs
    fresh = mysql.open_episode([T])
    try:
        assert fresh.execute("SELECT COUNT(*) FROM t").rows == ((2,),)
    finally:
        fresh.close()


def test_session_status_counters_start_again(mysql: MySQLBackend) -> None:
    first = mysql.open_episode([T])
    connection_id = first.connection_id
    for _ in range(5):
        first.execute("SELECT * FROM t")
    first.close()
    db = reopen(mysql, first, connection_id)
    try:
        # What the last episode did (how many queries, rows read) is not readable here.
        status = dict(db.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Com_select', 'Rows_read')").rows)
        assert status == {"Com_select": "0", "Rows_read": "0"}
    finally:
        db.close()
