"""The SQL that creates and fills an episode database, in batches of one round trip each.

Built here, run by the backend on its loader session (several statements per call): every
name is quoted with :func:`~agentunit_gym.backends.sql.hashing.quote_mysql_identifier` and
every value escaped by the driver, so a task's content cannot add a statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from agentunit_gym.backends.sql.base import TableData
from agentunit_gym.backends.sql.hashing import quote_mysql_identifier, table_statements
from agentunit_gym.backends.sql.mysql.accounts import grant_pattern
from agentunit_gym.errors import ConfigError

BATCH_CHARS = 1_000_000
"""Statements sent in one round trip add up to at most this many characters (a single longer
one goes alone), well under the server's ``max_allowed_packet`` (16 MiB by default)."""


def check_database_name(name: str) -> None:
    """Raises ConfigError: not a valid MySQL database name."""
    if not name or "\x00" in name or len(name) > 64 or name != name.rstrip(" "):
        raise ConfigError(
            f"database name {name!r} is not valid on MySQL: 1-64 characters, no NUL, no trailing space"
        )


def load_statements(escape: Callable[[tuple[object, ...]], str], database: str,
                    tables: Sequence[TableData]) -> list[str]:
    """``CREATE TABLE`` and multi-row ``INSERT`` statements (each at most :data:`BATCH_CHARS`,
    unless one row alone is longer) for ``tables`` in ``database``.

    Args:
        escape: the driver's escaping of a row into ``('a', NULL, ...)`` (pymysql's
            ``Connection.escape``).
    """
    statements = []
    for table in tables:
        create, insert = table_statements(table, quote_mysql_identifier, "%s", database=database)
        statements.append(create)
        prefix = insert[:insert.rindex(" VALUES (")] + " VALUES "
        values: list[str] = []
        size = len(prefix)
        for row in table.rows:
            value = escape(tuple(row))
            if values and size + len(value) + 1 > BATCH_CHARS:
                statements.append(prefix + ",".join(values))
                values, size = [], len(prefix)
            values.append(value)
            size += len(value) + 1
        if values:
            statements.append(prefix + ",".join(values))
    return statements


def move_grant_statements(account: str, old: str, new: str) -> list[str]:
    """Give ``account`` the database ``new`` instead of ``old`` (a spare's user, for a task
    that names its database)."""
    return [f"REVOKE ALL PRIVILEGES ON {quote_mysql_identifier(grant_pattern(old))}.* FROM {account}",
            f"GRANT ALL PRIVILEGES ON {quote_mysql_identifier(grant_pattern(new))}.* TO {account}"]


def batches(statements: list[str]) -> Iterator[list[str]]:
    """``statements`` in consecutive groups of at most :data:`BATCH_CHARS` characters."""
    batch: list[str] = []
    size = 0
    for statement in statements:
        if batch and size + len(statement) > BATCH_CHARS:
            yield batch
            batch, size = [], 0
        batch.append(statement)
        size += len(statement) + 2
    if batch:
        yield batch
