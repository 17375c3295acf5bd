"""Safety of the SQL backends against a hostile agent, on a real MariaDB server and on SQLite.

The agent may only reach its own episode database; everything else it tries fails as a
result (never an exception, never a side effect); runaway statements hit the time limit
and the episode goes on; infrastructure failures raise typed errors and the next episode
recovers; episodes leave nothing behind.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentunit_gym.backends.process import docker_client
from agentunit_gym.backends.sql.base import Column, EpisodeDatabase, TableData
from agentunit_gym.backends.sql.hashing import quote_mysql_identifier, quote_sqlite_identifier, table_statements
from agentunit_gym.backends.sql.mysql import MySQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.errors import BackendError, EpisodeStateError
from tests.backends.external_mysql import admin_rows

SECRET = TableData("secret", (Column("s"),), (("do not read",),))
MINE = TableData("mine", (Column("n", "INT"), Column("v")), tuple((str(i), f"v{i}") for i in range(1, 51)))
CROSS_JOIN = ("SELECT COUNT(*) FROM mine a, mine b, mine c, mine d, mine e, mine f "
              "WHERE a.n + b.n + c.n + d.n + e.n + f.n = -1")


def state(backend: MySQLBackend) -> tuple[list[Any], list[Any], list[Any]]:
    """Databases, accounts and the users of live connections on the server, once the backend's
    worker has dropped what ended; its ready spares (made ahead, renewed after every episode)
    left out."""
    backend.settle()
    spare_dbs, spare_users = backend.spare_names()
    return ([row for row in admin_rows(backend, "SHOW DATABASES") if row[0] not in spare_dbs],
            [row for row in admin_rows(backend, "SELECT user, host FROM mysql.user ORDER BY user, host")
             if row[0] not in spare_users],
            [row for row in admin_rows(backend, "SELECT user FROM information_schema.processlist ORDER BY user")
             if row[0] not in spare_users])


@pytest.fixture(scope="module")
def mysql() -> Iterator[MySQLBackend]:
    backend = MySQLBackend()
    yield backend
    backend.close()


@pytest.fixture()
def pair(mysql: MySQLBackend) -> Iterator[tuple[EpisodeDatabase, EpisodeDatabase]]:
    """The agent's episode and another open episode holding a secret."""
    other = mysql.open_episode([SECRET])
    mine = mysql.open_episode([MINE])
    yield mine, other
    mine.close()
    other.close()


@pytest.mark.docker
class TestMySQLIsolation:
    def test_agent_sees_only_its_own_database(self, mysql: MySQLBackend,
                                              pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, other = pair
        assert sorted(mine.execute("SHOW DATABASES").rows) == sorted([(mine.name,), ("information_schema",)])
        schemata = mine.execute("SELECT schema_name FROM information_schema.schemata").rows
        assert sorted(schemata) == sorted([(mine.name,), ("information_schema",)])
        tables = mine.execute("SELECT table_schema, table_name FROM information_schema.tables "
                              "WHERE table_schema <> 'information_schema'").rows
        assert (mine.name, "mine") in tables
        assert all(schema in (mine.name, "performance_schema") for schema, _ in tables)
        assert not any(name == "secret" for _, name in tables)
        # Only its own connection in the process list.
        procs = mine.execute("SELECT user FROM information_schema.processlist").rows
        assert {user for (user,) in procs} == {mine.user.split("'")[1]}

    @pytest.mark.parametrize("sql", [
        "SELECT * FROM mysql.user",
        "SELECT * FROM mysql.db",
        "SELECT * FROM performance_schema.threads",
        "SELECT * FROM performance_schema.events_statements_history",
    ])
    def test_system_schemas_are_out_of_reach(self, pair: tuple[EpisodeDatabase, EpisodeDatabase], sql: str) -> None:
        mine, _ = pair
        result = mine.execute(sql)
        assert result.error is not None and "denied" in result.error
        assert result.rows == ()

    def test_other_episodes_data_is_out_of_reach(self, pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, other = pair
        for sql in (f"SELECT * FROM `{other.name}`.secret", f"DELETE FROM `{other.name}`.secret",
                    f"DROP TABLE `{other.name}`.secret", f"DROP DATABASE `{other.name}`",
                    f"CREATE TABLE `{other.name}`.planted (x TEXT)",
                    f"RENAME TABLE `{other.name}`.secret TO `{mine.name}`.stolen"):
            result = mine.execute(sql)
            assert result.error is not None and "denied" in result.error.lower(), (sql, result.error)
        assert other.execute("SELECT s FROM secret").rows == (("do not read",),)
        assert other.execute("SHOW TABLES").rows == (("secret",),)

    def test_grant_names_are_not_wildcards(self, mysql: MySQLBackend) -> None:
        # In GRANT, '_' matches any character: a grant on a_b must not cover aXb.
        lookalike = "agentunit_safetyXab"
        admin_rows(mysql, f"CREATE DATABASE `{lookalike}`")
        admin_rows(mysql, f"CREATE TABLE `{lookalike}`.t (x TEXT)")
        db = mysql.open_episode([MINE], database="agentunit_safety_ab")
        try:
            result = db.execute(f"SELECT * FROM `{lookalike}`.t")
            assert result.error is not None and "denied" in result.error
            assert db.execute(f"DROP DATABASE `{lookalike}`").error is not None
        finally:
            db.close()
            admin_rows(mysql, f"DROP DATABASE `{lookalike}`")

    def test_same_database_name_twice_is_a_typed_error(self, mysql: MySQLBackend) -> None:
        first = mysql.open_episode([MINE], database="agentunit_twice")
        try:
            with pytest.raises(BackendError, match="already exists"):
                mysql.open_episode([SECRET], database="agentunit_twice")
            assert first.execute("SELECT COUNT(*) FROM mine").rows == ((50,),)
        finally:
            first.close()


@pytest.mark.docker
class TestMySQLHarmfulStatements:
    @pytest.mark.parametrize("template", [
        "DROP DATABASE `{other}`",
        "DROP DATABASE mysql",
        "SHUTDOWN",
        "GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER",
        "GRANT ALL PRIVILEGES ON `{other}`.* TO CURRENT_USER",
        "CREATE USER 'evil'@'%' IDENTIFIED BY 'x'",
        "SELECT 1 INTO OUTFILE '/tmp/agentunit-outfile'",
        "SELECT * FROM mine INTO DUMPFILE '/var/lib/mysql/x'",
        "LOAD DATA INFILE '/etc/passwd' INTO TABLE mine",
        "SET GLOBAL max_connections = 1",
        "SET GLOBAL read_only = 1",
        "FLUSH PRIVILEGES",
        "INSTALL SONAME 'ha_connect'",
    ])
    def test_fails_as_a_result_without_side_effects(self, mysql: MySQLBackend,
                                                     pair: tuple[EpisodeDatabase, EpisodeDatabase],
                                                     template: str) -> None:
        mine, other = pair
        before = admin_rows(mysql, "SELECT @@global.max_connections, @@global.read_only")
        result = mine.execute(template.format(other=other.name))
        assert result.error is not None, template
        assert not result.timed_out
        # Nothing changed: the other episode, the server's settings, the agent's own db.
        assert other.execute("SELECT s FROM secret").rows == (("do not read",),)
        assert admin_rows(mysql, "SELECT @@global.max_connections, @@global.read_only") == before
        assert mine.execute("SELECT COUNT(*) FROM mine").rows == ((50,),)
        assert ("evil", "%") not in admin_rows(mysql, "SELECT user, host FROM mysql.user")

    def test_load_file_reads_nothing(self, pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, _ = pair
        result = mine.execute("SELECT LOAD_FILE('/etc/passwd')")
        # MySQL answers NULL (not an error) without the FILE privilege.
        assert result.ok and result.rows == ((None,),)

    def test_killing_its_own_connection_is_a_result_and_the_episode_goes_on(
            self, pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, _ = pair
        assert mine.execute("SET @kept = 1").ok
        before = mine.connection_id
        result = mine.execute("KILL CONNECTION_ID()")
        assert result.error is not None and "own connection" in result.error
        assert mine.connection_id != before
        # A new session: the variable is gone, the data is not.
        assert mine.execute("SELECT @kept, COUNT(*) FROM mine").rows == ((None, 50),)

    def test_agent_cannot_kill_the_admin_connection(self, mysql: MySQLBackend,
                                                     pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, other = pair
        admin_ids = admin_rows(mysql, "SELECT id FROM information_schema.processlist WHERE user = 'agentunit_admin'")
        for (thread_id,) in admin_ids:
            assert mine.execute(f"KILL {thread_id}").error is not None
        assert other.admin_query("SELECT COUNT(*) FROM secret").rows == ((1,),)


@pytest.mark.docker
class TestMySQLTimeLimits:
    @pytest.mark.parametrize("sql", ["SELECT SLEEP(1000)", CROSS_JOIN])
    def test_runaway_statements_hit_the_limit(self, pair: tuple[EpisodeDatabase, EpisodeDatabase], sql: str) -> None:
        mine, _ = pair
        result = mine.execute(sql, timeout=1.0)
        assert result.timed_out and not result.ok
        assert 0.95 <= result.duration_s < 3.0
        assert mine.execute("SELECT v FROM mine WHERE n = 3").rows == (("v3",),)

    @pytest.mark.parametrize("override", ["SET SESSION max_statement_time = 0", "SET max_statement_time = 100000"])
    def test_the_agent_cannot_lift_its_session_limit(self, pair: tuple[EpisodeDatabase, EpisodeDatabase],
                                                      override: str) -> None:
        mine, _ = pair
        assert mine.execute(override).ok
        result = mine.execute("SELECT SLEEP(1000)", timeout=1.0)
        assert result.timed_out and result.duration_s < 3.0

    def test_a_per_statement_override_is_killed_by_the_watchdog(
            self, pair: tuple[EpisodeDatabase, EpisodeDatabase]) -> None:
        mine, _ = pair
        result = mine.execute("SET STATEMENT max_statement_time = 0 FOR SELECT SLEEP(1000)", timeout=1.0)
        assert result.timed_out
        assert 1.0 <= result.duration_s < 4.0
        # The KILL QUERY did not spill onto the next statements.
        for _ in range(3):
            assert mine.execute("SELECT COUNT(*) FROM mine", timeout=1.0).rows == ((50,),)


@pytest.mark.docker
def test_a_lock_held_by_the_agent_cannot_hang_grading(mysql: MySQLBackend) -> None:
    db = mysql.open_episode([MINE])
    try:
        assert db.execute("LOCK TABLES mine WRITE").ok
        marker = db.table_hash("mine", ["n", "v"])
        assert marker.startswith("error:") and "Lock wait timeout" in marker
    finally:
        db.close()  # resetting the agent's session releases its lock, so the drop goes through
    mysql.settle()
    # The account is a spare again, its database dropped and created empty (renewed).
    assert db.name in mysql.spare_names()[0]
    assert admin_rows(mysql, f"SHOW TABLES FROM `{db.name}`") == []


@pytest.mark.docker
class TestMySQLFailures:
    def test_a_killed_agent_connection_raises_and_the_next_episode_works(self, mysql: MySQLBackend) -> None:
        db = mysql.open_episode([MINE])
        admin_rows(mysql, f"KILL {db.connection_id}")
        with pytest.raises(BackendError, match="dropped"):
            db.execute("SELECT 1")
        with pytest.raises(BackendError):
            db.execute("SELECT 1")  # stays failed, with the same typed error
        name = db.name
        db.close()
        mysql.settle()
        assert (name,) not in admin_rows(mysql, "SHOW DATABASES")
        fresh = mysql.open_episode([MINE])
        try:
            assert fresh.execute("SELECT COUNT(*) FROM mine").rows == ((50,),)
        finally:
            fresh.close()

    def test_a_killed_server_raises_and_the_next_episode_gets_a_new_server(self) -> None:
        backend = MySQLBackend()
        try:
            old_name = backend.container_name
            db = backend.open_episode([MINE])
            docker = docker_client()
            docker.containers.get(old_name).kill()
            with pytest.raises(BackendError, match="gone"):
                db.execute("SELECT 1")
            db.close()  # nothing left to drop: must not raise
            fresh = backend.open_episode([MINE])
            assert backend.container_name != old_name
            assert fresh.execute("SELECT SUM(n) FROM mine").rows[0][0] == sum(range(1, 51))
            fresh.close()
            assert not docker.containers.list(all=True, filters={"name": old_name})
            socket_path = backend.admin_connect_params().unix_socket
        finally:
            backend.close()
        assert not docker.containers.list(all=True, filters={"name": backend.container_name or "-"})
        assert socket_path is not None and not os.path.exists(os.path.dirname(socket_path))

    def test_closed_backend_refuses_new_episodes(self) -> None:
        backend = MySQLBackend()
        db = backend.open_episode([MINE])
        name = backend.container_name
        backend.close()
        backend.close()
        assert db.closed
        with pytest.raises(EpisodeStateError):
            backend.open_episode([MINE])
        assert not docker_client().containers.list(all=True, filters={"name": name})


@pytest.mark.docker
def test_500_episodes_leave_nothing_behind(mysql: MySQLBackend) -> None:
    before = state(mysql)
    for i in range(500):
        db = mysql.open_episode([MINE])
        result = db.execute(f"UPDATE mine SET v = 'x' WHERE n = {i % 50 + 1}")
        assert result.rowcount == 1
        db.close()
    dbs, users, connections = state(mysql)
    assert (dbs, users) == before[:2]
    # A connection closed before the run may still be listed in `before` while the server
    # reaps it, so compare counts per user: nothing may have been added.
    before_count, after_count = Counter(map(tuple, before[2])), Counter(map(tuple, connections))
    assert not after_count - before_count, f"connections left behind: {after_count - before_count}"
    assert mysql.open_episodes == 0


# -- SQLite: the same checks where they apply ---------------------------------------------


@pytest.fixture()
def lite() -> Iterator[SQLiteBackend]:
    backend = SQLiteBackend()
    yield backend
    backend.close()


class TestSQLiteSafety:
    @pytest.mark.parametrize("sql", [
        "ATTACH DATABASE '{path}' AS other",
        "VACUUM INTO '{path}'",
        "PRAGMA writable_schema = ON",
        "PRAGMA journal_mode = WAL",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT randomblob(100000000)",
    ])
    def test_outside_reach_fails_as_a_result(self, lite: SQLiteBackend, tmp_path: Any, sql: str) -> None:
        target = tmp_path / "escape.db"
        db = lite.open_episode([MINE])
        result = db.execute(sql.format(path=target))
        assert result.error is not None and not result.timed_out
        assert not target.exists()
        assert db.execute("SELECT COUNT(*) FROM mine").rows == ((50,),)
        db.close()

    def test_introspection_pragmas_still_work(self, lite: SQLiteBackend) -> None:
        db = lite.open_episode([MINE])
        info = db.execute("PRAGMA table_info(mine)")
        assert [row[1] for row in info.rows] == ["n", "v"]
        db.close()

    @pytest.mark.parametrize("sql", [
        CROSS_JOIN,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
    ])
    def test_runaway_statements_hit_the_limit(self, lite: SQLiteBackend, sql: str) -> None:
        db = lite.open_episode([MINE])
        result = db.execute(sql, timeout=0.5)
        assert result.timed_out and 0.5 <= result.duration_s < 1.5
        assert db.execute("SELECT v FROM mine WHERE n = 3").rows == (("v3",),)
        db.close()

    def test_episodes_never_share_a_database(self, lite: SQLiteBackend) -> None:
        first = lite.open_episode([SECRET])
        second = lite.open_episode([MINE])
        assert second.execute("SELECT * FROM secret").error is not None
        assert second.execute("SELECT name FROM sqlite_master").rows == (("mine",),)
        first.close()
        second.close()

    def test_500_episodes_leave_nothing_behind(self, lite: SQLiteBackend) -> None:
        episodes = []
        for i in range(500):
            db = lite.open_episode([MINE])
            assert db.execute(f"UPDATE mine SET v = 'x' WHERE n = {i % 50 + 1}").rowcount == 1
            db.close()
            episodes.append(db)
        assert lite.open_episodes == 0
        assert all(db.closed for db in episodes)


# -- names spliced into SQL -----------------------------------------------------------------


HOSTILE = "x`; DROP TABLE mine; -- \"q\""


@pytest.mark.parametrize(("quote", "expected"), [
    (quote_mysql_identifier, "`x``; DROP TABLE mine; -- \"q\"`"),
    (quote_sqlite_identifier, '"x`; DROP TABLE mine; -- ""q"""'),
])
def test_quoting_doubles_the_quote_character(quote: Callable[[str], str], expected: str) -> None:
    assert quote(HOSTILE) == expected
    for bad in ("", "a\x00b"):
        with pytest.raises(ValueError, match="not a valid SQL identifier"):
            quote(bad)


def test_table_statements_quote_every_name() -> None:
    table = TableData(HOSTILE, (Column(HOSTILE, "INT"), Column("v")), (("1", "a"),))
    create, insert = table_statements(table, quote_mysql_identifier, "%s", database="ep`1")
    target = f"`ep``1`.{quote_mysql_identifier(HOSTILE)}"
    assert create == f"CREATE TABLE {target} ({quote_mysql_identifier(HOSTILE)} INT, `v` TEXT)"
    assert insert == f"INSERT INTO {target} VALUES (%s, %s)"
    create, insert = table_statements(table, quote_sqlite_identifier, "?")
    assert create.startswith(f"CREATE TABLE {quote_sqlite_identifier(HOSTILE)} (")
    assert insert == f"INSERT INTO {quote_sqlite_identifier(HOSTILE)} VALUES (?, ?)"


def test_a_hostile_table_spec_creates_exactly_its_table(lite: SQLiteBackend) -> None:
    db = lite.open_episode([MINE, TableData(HOSTILE, (Column(HOSTILE),), (("'); DROP TABLE mine; --",),))])
    try:
        assert db.execute("SELECT COUNT(*) FROM mine").rows == ((50,),)
        assert db.execute(f"SELECT * FROM {quote_sqlite_identifier(HOSTILE)}").rows == (("'); DROP TABLE mine; --",),)
    finally:
        db.close()
