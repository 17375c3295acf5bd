"""Run the SQL conformance suite against every backend: sqlite, the MariaDB container and,
when ``AGENTUNIT_MYSQL_DSN`` is set, that server."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sql.base import FETCH_BATCH, QueryResult, SQLBackend, check_limits, fetch_capped
from agentunit_gym.backends.sql.hashing import hash_from_result
from agentunit_gym.backends.sql.mysql import MySQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.errors import BackendError, ConfigError
from tests.backends.external_mysql import external_dsn
from tests.backends.sql_conformance import SQLConformance


class TestSQLite(SQLConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SQLBackend]:
        sql = SQLiteBackend()
        yield sql
        sql.close()


@pytest.mark.docker
class TestMySQLContainer(SQLConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SQLBackend]:
        sql = MySQLBackend()
        yield sql
        sql.close()


@pytest.mark.mysql
@pytest.mark.docker
class TestMySQLDSN(SQLConformance):
    """An existing server by DSN: AGENTUNIT_MYSQL_DSN, else a networked MariaDB container."""

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[SQLBackend]:
        with external_dsn() as dsn:
            sql = MySQLBackend(dsn=dsn)
            yield sql
            sql.close()


# -- the pieces every backend builds its results with ---------------------------------------


class ListCursor:
    """A cursor over a list of rows that records how many rows each fetch asked for."""

    def __init__(self, n: int) -> None:
        self.rows = [(i,) for i in range(n)]
        self.asked: list[int] = []

    def fetchmany(self, size: int) -> list[tuple[int]]:
        self.asked.append(size)
        batch, self.rows = self.rows[:size], self.rows[size:]
        return batch


@pytest.mark.parametrize(("n", "max_rows", "kept"), [(0, 10, 0), (5, 10, 5), (10, 10, 10), (1300, 10, 10),
                                                     (1300, 600, 600), (1300, 0, 0)])
def test_fetch_capped_keeps_the_first_rows_and_counts_them_all(n: int, max_rows: int, kept: int) -> None:
    cursor = ListCursor(n)
    rows, total = fetch_capped(cursor, max_rows)
    assert rows == [(i,) for i in range(kept)] and total == n
    assert cursor.rows == []  # read to the end, in batches
    # Batches of FETCH_BATCH until one comes back empty.
    assert cursor.asked == [FETCH_BATCH] * (math.ceil(n / FETCH_BATCH) + 1)


@pytest.mark.parametrize(("timeout", "max_rows"), [(0, 10), (-1.0, 10), (1.0, -1)])
def test_limits_no_backend_can_honour_are_config_errors(timeout: float, max_rows: int) -> None:
    with pytest.raises(ConfigError, match="timeout must be > 0 and max_rows >= 0"):
        check_limits(timeout, max_rows)
    check_limits(0.001, 0)  # the smallest limits are fine


def test_hash_from_result() -> None:
    assert hash_from_result(QueryResult(rows=(("ab" * 16,),)), "t", "ep") == "ab" * 16
    assert hash_from_result(QueryResult(rows=((b"cd" * 16,),)), "t", "ep") == "cd" * 16  # engines may give bytes
    assert hash_from_result(QueryResult(rows=((None,),)), "t", "ep") == ""  # NULL: a table without rows
    assert hash_from_result(QueryResult(error="no such table: t"), "t", "ep") == "error: no such table: t"
    with pytest.raises(BackendError, match="hashing table 't' of episode 'ep' ran past 60 s"):
        hash_from_result(QueryResult(error="interrupted", timed_out=True), "t", "ep")
