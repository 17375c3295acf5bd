"""MySQL 8's behaviour on MariaDB, as AgentBench's mysql:8 server runs it (docs/sql-backends.md).

One test per setting we change, against the real MariaDB container and a MariaDB reached by
DSN (sessions set up by the backend, not by the server's configuration), and on SQLite where
the behaviour is the same there; then tests that pin each remaining difference the doc lists,
so the doc stays true.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sql.base import Column, EpisodeDatabase, SQLBackend, TableData
from agentunit_gym.backends.sql.mysql import (
    MARIADB_COLLATION,
    MARIADB_SQL_MODE,
    MYSQL8_GROUP_CONCAT_MAX_LEN,
    MYSQL8_SQL_MODE,
    Dialect,
    MySQLBackend,
)
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from tests.backends.external_mysql import tcp_mariadb

# AgentBench's shape: every column TEXT, numbers and text mixed in one column.
MIXED = TableData("scores", (Column("No"), Column("Name"), Column("Points")), (
    ("15", "Ann", "3"), ("16", "Bob", "4"), ("n/a", "Cy", "5"), ("17", "Dee", "6")))
WORDS = TableData("words", (Column("w"),), (("abc",), ("école",), ("straße",)))


def _rows(db: EpisodeDatabase, sql: str) -> tuple[tuple[object, ...], ...]:
    result = db.execute(sql)
    assert result.ok, result.error
    return result.rows


class SharedBehaviour:
    """What MySQL 8 does that every backend reproduces."""

    @pytest.fixture()
    def db(self, backend: SQLBackend) -> Iterator[EpisodeDatabase]:
        episode = backend.open_episode([MIXED, WORDS])
        yield episode
        episode.close()

    def test_update_comparing_a_text_column_with_a_number_runs(self, db: EpisodeDatabase) -> None:
        # MariaDB in strict mode: ERROR 1292 Truncated incorrect DECIMAL value: 'n/a'.
        result = db.execute("UPDATE scores SET Points = '40' WHERE No = 16")
        assert result.ok, result.error
        assert result.rowcount == 1
        assert _rows(db, "SELECT No, Points FROM scores ORDER BY Name") == (
            ("15", "3"), ("16", "40"), ("n/a", "5"), ("17", "6"))

    def test_delete_comparing_a_text_column_with_a_number_runs(self, db: EpisodeDatabase) -> None:
        result = db.execute("DELETE FROM scores WHERE No = 17")
        assert result.ok, result.error
        assert _rows(db, "SELECT Name FROM scores ORDER BY Name") == (("Ann",), ("Bob",), ("Cy",))

    def test_trailing_spaces_count_in_comparisons(self, db: EpisodeDatabase) -> None:
        # MySQL 8's utf8mb4_0900_ai_ci is NO PAD; MariaDB's default utf8mb4_general_ci ignores them.
        assert _rows(db, "SELECT COUNT(*) FROM words WHERE w = 'abc '") == ((0,),)
        assert _rows(db, "SELECT COUNT(*) FROM words WHERE w = 'abc'") == ((1,),)


class MySQLOnlyBehaviour(SharedBehaviour):
    """What MySQL 8 does that the server backends reproduce (SQLite has no such settings)."""

    def test_the_session_runs_mysql_8s_settings(self, db: EpisodeDatabase, backend: MySQLBackend) -> None:
        ((mode, collation, group_concat),) = _rows(
            db, "SELECT @@SESSION.sql_mode, @@SESSION.collation_connection, @@SESSION.group_concat_max_len")
        assert set(str(mode).split(",")) == set(MARIADB_SQL_MODE.split(","))
        assert collation == MARIADB_COLLATION and backend.dialect.collation == MARIADB_COLLATION
        assert int(str(group_concat)) == MYSQL8_GROUP_CONCAT_MAX_LEN
        ((column_collation,),) = _rows(
            db, "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = 'words'")
        assert column_collation == MARIADB_COLLATION

    def test_text_that_is_no_number_compares_as_zero(self, db: EpisodeDatabase) -> None:
        # MySQL reads 'n/a' as 0 (SQLite ranks any text above every number: a SQLite difference).
        assert db.execute("DELETE FROM scores WHERE No > 16").ok
        assert _rows(db, "SELECT Name FROM scores ORDER BY Name") == (("Ann",), ("Bob",), ("Cy",))
        assert _rows(db, "SELECT Name FROM scores WHERE No = 0") == (("Cy",),)

    def test_only_full_group_by(self, db: EpisodeDatabase) -> None:
        result = db.execute("SELECT Name, MAX(Points) FROM scores")
        assert not result.ok and result.error is not None and result.error.startswith("ERROR 1140")
        assert _rows(db, "SELECT MAX(Points) FROM scores") == (("6",),)

    def test_accents_and_case_do_not_count_and_sharp_s_is_ss(self, db: EpisodeDatabase) -> None:
        assert _rows(db, "SELECT w FROM words WHERE w = 'ECOLE'") == (("école",),)
        # utf8mb4_0900_ai_ci expands ß to ss; utf8mb4_general_ci makes it equal to one s.
        assert _rows(db, "SELECT w FROM words WHERE w = 'strasse'") == (("straße",),)

    def test_group_concat_is_cut_at_1024_characters(self, db: EpisodeDatabase) -> None:
        ((value,),) = _rows(db, "SELECT GROUP_CONCAT(REPEAT('x', 600)) FROM scores")
        assert len(str(value)) == MYSQL8_GROUP_CONCAT_MAX_LEN

    def test_the_agent_cannot_keep_a_strict_session_from_the_grader(self, db: EpisodeDatabase,
                                                                    backend: SQLBackend) -> None:
        # The agent may set its own session (as on MySQL); reference replay and hashing run on
        # the admin session, which keeps the dialect.
        assert db.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'").ok
        assert db.execute("UPDATE scores SET Points = '1' WHERE No = 16").error is not None
        assert db.admin_query("UPDATE scores SET Points = '41' WHERE No = 16").ok

    def test_every_statement_is_committed_as_agentbench_does(self, db: EpisodeDatabase) -> None:
        # AgentBench's client commits after each statement: an explicit transaction ends at
        # once, grading sees the change, and a later ROLLBACK has nothing to undo.
        assert db.execute("START TRANSACTION").ok
        assert db.execute("UPDATE scores SET Points = '1' WHERE Name = 'Ann'").ok
        assert db.admin_query("SELECT Points FROM scores WHERE Name = 'Ann'").rows == (("1",),)
        assert db.execute("ROLLBACK").ok
        assert db.admin_query("SELECT Points FROM scores WHERE Name = 'Ann'").rows == (("1",),)
        assert db.execute("SET autocommit = 0").ok
        assert db.execute("DELETE FROM scores WHERE Name = 'Ann'").ok
        assert db.admin_query("SELECT COUNT(*) FROM scores").rows == ((3,),)

    # -- remaining differences (docs/sql-backends.md lists them) ------------------------------

    def test_remaining_difference_a_bad_value_in_a_change_is_stored_with_a_warning(
            self, db: EpisodeDatabase) -> None:
        # MySQL 8 (strict): ERROR 1365 Division by 0. Here: NULL and a warning.
        assert db.execute("UPDATE scores SET Points = 1/0 WHERE Name = 'Ann'").ok
        assert _rows(db, "SELECT Points FROM scores WHERE Name = 'Ann'") == ((None,),)


    def test_remaining_difference_cast_in_a_change_is_a_warning(self, db: EpisodeDatabase) -> None:
        # MySQL 8 (strict): ERROR 1292 Truncated incorrect INTEGER value. Here: 0.
        assert db.execute("UPDATE scores SET Points = CAST('abc' AS SIGNED) WHERE Name = 'Ann'").ok
        assert _rows(db, "SELECT Points FROM scores WHERE Name = 'Ann'") == (("0",),)

    def test_remaining_difference_no_functional_dependence_under_only_full_group_by(
            self, db: EpisodeDatabase) -> None:
        # MySQL 8 accepts Name here (fixed by WHERE Name = 'Bob'); MariaDB refuses it.
        result = db.execute("SELECT No, Name FROM scores WHERE Name = 'Bob' GROUP BY No")
        assert result.error is not None and result.error.startswith("ERROR 1055")

    def test_remaining_difference_no_any_value(self, db: EpisodeDatabase) -> None:
        result = db.execute("SELECT ANY_VALUE(Name) FROM scores")
        assert result.error is not None and result.error.startswith("ERROR 1305")


class TestSQLite(SharedBehaviour):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SQLBackend]:
        sql = SQLiteBackend()
        yield sql
        sql.close()


@pytest.mark.docker
class TestMariaDBContainer(MySQLOnlyBehaviour):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[MySQLBackend]:
        sql = MySQLBackend()
        yield sql
        sql.close()

    def test_the_image_runs_the_same_settings_for_any_client(self, backend: MySQLBackend) -> None:
        db = backend.open_episode([MIXED])
        try:
            ((mode, collation, group_concat),) = db.admin_query(
                "SELECT @@GLOBAL.sql_mode, @@GLOBAL.collation_server, @@GLOBAL.group_concat_max_len").rows
        finally:
            db.close()
        assert set(str(mode).split(",")) == set(MARIADB_SQL_MODE.split(","))
        assert collation == MARIADB_COLLATION and int(str(group_concat)) == MYSQL8_GROUP_CONCAT_MAX_LEN


@pytest.mark.mysql
@pytest.mark.docker
class TestMariaDBByDSN(MySQLOnlyBehaviour):
    """A server whose own configuration is MariaDB's stock one: the sessions carry the dialect."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[MySQLBackend]:
        with tcp_mariadb() as (dsn, _container):
            sql = MySQLBackend(dsn=dsn)
            yield sql
            sql.close()

    def test_the_server_itself_is_stock(self, backend: MySQLBackend) -> None:
        db = backend.open_episode([MIXED])
        try:
            ((mode,),) = db.admin_query("SELECT @@GLOBAL.sql_mode").rows
        finally:
            db.close()
        assert "STRICT_TRANS_TABLES" in str(mode)


def test_dialects() -> None:
    assert "STRICT_TRANS_TABLES" in MYSQL8_SQL_MODE and "STRICT_TRANS_TABLES" not in MARIADB_SQL_MODE
    assert set(MYSQL8_SQL_MODE.split(",")) - set(MARIADB_SQL_MODE.split(",")) == {"STRICT_TRANS_TABLES"}
    assert Dialect(MARIADB_SQL_MODE, None).database_options == "CHARACTER SET utf8mb4"
    assert Dialect(MYSQL8_SQL_MODE, "utf8mb4_0900_ai_ci").session_statements() == [
        f"SET SESSION sql_mode = '{MYSQL8_SQL_MODE}', group_concat_max_len = 1024",
        "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci"]


@pytest.mark.docker
def test_task_rows_still_load_strictly_and_the_admin_session_keeps_the_dialect() -> None:
    from agentunit_gym.errors import ConfigError

    backend = MySQLBackend()
    try:
        with pytest.raises(ConfigError, match="rejected"):
            backend.open_episode([TableData("t", (Column("a", "INT"),), (("not a number",),))])
        db = backend.open_episode([MIXED])
        try:
            ((mode,),) = db.admin_query("SELECT @@SESSION.sql_mode").rows
            assert set(str(mode).split(",")) == set(MARIADB_SQL_MODE.split(","))
            assert db.admin_query("UPDATE scores SET Points = '9' WHERE No = 16").ok
        finally:
            db.close()
    finally:
        backend.close()


@pytest.mark.docker
def test_a_server_without_the_collation_keeps_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # As an older MariaDB (< 10.10) reached by DSN would: the rest of the dialect still holds.
    from agentunit_gym.backends.sql.mysql import dialect as dialect_module

    monkeypatch.setattr(dialect_module, "MARIADB_COLLATION", "utf8mb4_no_such_collation_ci")
    backend = MySQLBackend()
    try:
        assert backend.dialect.collation is None
        db = backend.open_episode([MIXED])
        try:
            ((mode,),) = _rows(db, "SELECT @@SESSION.sql_mode")
            assert set(str(mode).split(",")) == set(MARIADB_SQL_MODE.split(","))
            assert db.execute("UPDATE scores SET Points = '9' WHERE No = 16").rowcount == 1
        finally:
            db.close()
    finally:
        backend.close()
