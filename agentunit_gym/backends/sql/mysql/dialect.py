"""MySQL 8's dialect: the session settings that make MariaDB (or MySQL) behave as AgentBench's server.

AgentBench grades its DB items on the official mysql:8 image started with no sql_mode or
collation option, so its sessions run MySQL 8.0's defaults. Every session we open (the
agent's and the admin one that replays reference SQL and hashes tables) is set to those,
on our MariaDB container and on any server reached by DSN. See docs/sql-backends.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentunit_gym.backends.sql.mysql.connection import error_code, load_pymysql

MYSQL8_SQL_MODE = ("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                   "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")
"""MySQL 8.0's default ``sql_mode``."""
MARIADB_SQL_MODE = ",".join(mode for mode in MYSQL8_SQL_MODE.split(",") if mode != "STRICT_TRANS_TABLES")
"""MySQL 8.0's modes less strict mode, for MariaDB. MySQL converts a TEXT value to a number
silently (``WHERE No = 16`` over rows holding text), MariaDB with a 1292 warning that strict
mode turns into an error in UPDATE and DELETE; without strict mode the statement runs as on
MySQL 8. The cost, documented: values MySQL 8 rejects in a data change (1/0, a too long
value) are stored as NULL or cut, with a warning."""
MYSQL8_COLLATION = "utf8mb4_0900_ai_ci"
"""MySQL 8.0's default utf8mb4 collation: UCA 9.0, accent and case insensitive, NO PAD."""
MARIADB_COLLATION = "utf8mb4_uca1400_nopad_ai_ci"
"""The closest MariaDB (10.10+) has: UCA 14.0, accent and case insensitive, NO PAD."""
MYSQL8_GROUP_CONCAT_MAX_LEN = 1024
"""MySQL 8.0's default (MariaDB's is 1 MiB): a longer GROUP_CONCAT result is cut there."""
ER_UNKNOWN_COLLATION = 1273


@dataclass(frozen=True)
class Dialect:
    """The session settings that make a server behave as AgentBench's MySQL 8."""

    sql_mode: str
    collation: str | None
    """None when the server has no collation close to MySQL 8's (it keeps its own)."""
    server_defaults: bool = False
    """True when the server's global defaults already are ``sql_mode`` and MySQL 8's
    ``group_concat_max_len`` (our image's configuration): a new session needs no ``SET`` for
    them (:attr:`connect_init_command` is None)."""

    @property
    def init_command(self) -> str:
        """The settings but the collation, in one statement (a connection's ``init_command``)."""
        return f"SET SESSION sql_mode = '{self.sql_mode}', group_concat_max_len = {MYSQL8_GROUP_CONCAT_MAX_LEN}"

    @property
    def connect_init_command(self) -> str | None:
        """What a new connection must run besides ``SET NAMES`` (None: the defaults hold)."""
        return None if self.server_defaults else self.init_command

    def session_statements(self) -> list[str]:
        """The statements that set a fresh session up."""
        statements = [self.init_command]
        if self.collation is not None:
            statements.append(f"SET NAMES utf8mb4 COLLATE {self.collation}")
        return statements

    @property
    def database_options(self) -> str:
        """``CREATE DATABASE`` options: tables created in it take their collation from it."""
        return "CHARACTER SET utf8mb4" + (f" COLLATE {self.collation}" if self.collation else "")


def pick_dialect(conn: Any, flavor: str) -> Dialect:
    """MySQL 8's settings as far as the server supports them (probed on ``conn``, then set on it).

    Raises:
        pymysql.err.MySQLError: the server refused a setting other than an unknown collation.
    """
    pymysql = load_pymysql()
    sql_mode = MARIADB_SQL_MODE if flavor == "mariadb" else MYSQL8_SQL_MODE
    collation: str | None = MARIADB_COLLATION if flavor == "mariadb" else MYSQL8_COLLATION
    with conn.cursor() as cur:
        try:
            cur.execute(f"SET NAMES utf8mb4 COLLATE {collation}")
        except pymysql.err.MySQLError as exc:
            if error_code(exc) != ER_UNKNOWN_COLLATION:
                raise
            collation = None  # an older server (MariaDB < 10.10, MySQL 5.7): its own default
        cur.execute("SELECT @@GLOBAL.sql_mode, @@GLOBAL.group_concat_max_len")
        global_mode, global_length = cur.fetchone()
    defaults = (set(str(global_mode).split(",")) - {""} == set(sql_mode.split(","))
                and int(global_length) == MYSQL8_GROUP_CONCAT_MAX_LEN)
    dialect = Dialect(sql_mode, collation, defaults)
    apply_dialect(conn, dialect)
    return dialect


def apply_dialect(conn: Any, dialect: Dialect) -> None:
    with conn.cursor() as cur:
        for statement in dialect.session_statements():
            cur.execute(statement)
