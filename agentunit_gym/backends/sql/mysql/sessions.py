"""The backend's own connections to its server, one job each, their sessions set up once.

- ``admin``: replays a task's reference SQL (``admin_query``), in MySQL 8's dialect;
- ``loader``: creates and fills episode databases, in strict mode with no time limit, with
  several statements per round trip (only the backend's own SQL runs there);
- ``hasher``: runs the table hash only, its time limit and ``GROUP_CONCAT`` length fixed,
  so a hash is one round trip.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentunit_gym.backends.sql.hashing import AGENTBENCH_GROUP_CONCAT_MAX_LEN, HASH_TIMEOUT_S
from agentunit_gym.backends.sql.mysql.accounts import open_admin
from agentunit_gym.backends.sql.mysql.connection import ConnectParams, close_quietly, load_pymysql
from agentunit_gym.backends.sql.mysql.dialect import MYSQL8_SQL_MODE, Dialect, apply_dialect, pick_dialect

PING_IDLE_S = 1.0
"""The sessions are pinged before use only after this long without a successful use."""


@dataclass
class AdminSessions:
    """The three connections, and what the server told about itself when they opened."""

    admin: Any
    loader: Any
    hasher: Any
    server_version: str
    flavor: str
    """``"mariadb"`` or ``"mysql"``."""
    dialect: Dialect
    used_at: float = field(default_factory=time.monotonic)
    """When the loader last answered (``time.monotonic()``)."""

    def fresh(self) -> bool:
        """Whether they worked a moment ago (then ``open_episode`` skips the ping)."""
        return time.monotonic() - self.used_at < PING_IDLE_S

    def ping(self) -> bool:
        """Whether all three still answer."""
        try:
            for conn in (self.loader, self.admin, self.hasher):
                conn.ping(reconnect=False)
        except load_pymysql().err.MySQLError:
            return False
        self.used_at = time.monotonic()
        return True

    def close(self) -> None:
        for conn in (self.admin, self.loader, self.hasher):
            close_quietly(conn)


def open_sessions(params: ConnectParams) -> AdminSessions:
    """Open and set up the three sessions.

    Raises:
        BackendUnavailableError: the server cannot be reached.
        pymysql.err.MySQLError: the server refused a setting.
    """
    opened: list[Any] = []
    try:
        admin = open_admin(params)
        opened.append(admin)
        with admin.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = str(cur.fetchone()[0])
        flavor = "mariadb" if "mariadb" in version.lower() else "mysql"
        dialect = pick_dialect(admin, flavor)
        limit = "max_statement_time" if flavor == "mariadb" else "max_execution_time"
        hasher = open_admin(params)
        opened.append(hasher)
        apply_dialect(hasher, dialect)
        hash_limit = f"{HASH_TIMEOUT_S:.3f}" if flavor == "mariadb" else str(int(HASH_TIMEOUT_S * 1000))
        with hasher.cursor() as cur:
            cur.execute(f"SET SESSION {limit} = {hash_limit}, group_concat_max_len = {AGENTBENCH_GROUP_CONCAT_MAX_LEN}")
        loader = open_admin(params, multi_statements=True)
        opened.append(loader)
        with loader.cursor() as cur:
            # Strict while loading: the task's rows go in exactly or the task is refused.
            cur.execute(f"SET SESSION {limit} = 0, sql_mode = '{MYSQL8_SQL_MODE}'")
    except BaseException:
        for conn in opened:
            close_quietly(conn)
        raise
    return AdminSessions(admin, loader, hasher, version, flavor, dialect)
