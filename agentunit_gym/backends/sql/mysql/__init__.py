"""The server SQL backend: MySQL or MariaDB, in a container of ours or an existing server.

One server per backend instance, reused across episodes:

- by default a MariaDB container from the project's ``mariadb`` image (Debian's
  mariadb-server, so it builds without a registry), datadir on tmpfs, ``--network none``,
  clients coming through a unix socket in a bind-mounted host directory; or a container of
  an image the user names (``image="mysql:8"``), started the way the official images expect;
- or an existing server given by a DSN, ``mysql://user:pass@host:port/`` (or
  ``?unix_socket=/path``), whose user may create databases and users and grant on them.

Each episode gets its own database, created from the task's tables and dropped after, and
its own user that holds privileges on that database only; the agent's statements run on a
connection of that user. The user, the empty database and the connection are made ahead by
a worker thread (the warm spare), which also renews an ended episode's account for a later
one (session reset, database dropped and created again) or drops it. A statement time limit
is enforced by the server (``max_statement_time`` on MariaDB, ``max_execution_time`` on
MySQL, set before a statement whenever the agent may have changed it), backed by ``KILL
QUERY`` from a second admin connection shortly after the limit, and by a client read
timeout after that.

The modules, by concern:

- :mod:`.connection`: connect parameters, DSNs, :func:`connect` (SSL off), error codes;
- :mod:`.dialect`: the session settings that make the server behave as MySQL 8;
- :mod:`.statement`: one statement under a time limit, and the ``KILL QUERY`` watchdog;
- :mod:`.server`: the server's home, a container we start or a DSN;
- :mod:`.episode`: one episode's database as the agent and the grader reach it;
- :mod:`.accounts`: an episode account (user, database, connection): made, renewed for
  another episode, dropped;
- :mod:`.spares`: episode accounts made ahead, renewed and dropped behind by a worker
  thread, off the episode's critical path;
- :mod:`.sessions`: the backend's own connections (grading, loading, hashing), each set up
  once; :mod:`.loading`: the batched SQL that creates and fills an episode database;
- :mod:`.backend`: :class:`MySQLBackend`, which loads episodes' tables, hands out accounts,
  and recovers a server that died.
"""

from agentunit_gym.backends.sql.mysql.backend import ADMIN_LOCK_WAIT_S, MySQLBackend
from agentunit_gym.backends.sql.mysql.connection import ConnectParams, connect, parse_dsn
from agentunit_gym.backends.sql.mysql.dialect import (
    MARIADB_COLLATION,
    MARIADB_SQL_MODE,
    MYSQL8_COLLATION,
    MYSQL8_GROUP_CONCAT_MAX_LEN,
    MYSQL8_SQL_MODE,
    Dialect,
)
from agentunit_gym.backends.sql.mysql.episode import MySQLEpisode
from agentunit_gym.backends.sql.mysql.server import ADMIN_USER, CONTAINER_LABELS
from agentunit_gym.backends.sql.mysql.statement import KILL_GRACE_S, READ_GRACE_S

__all__ = [
    "ADMIN_LOCK_WAIT_S",
    "ADMIN_USER",
    "CONTAINER_LABELS",
    "KILL_GRACE_S",
    "MARIADB_COLLATION",
    "MARIADB_SQL_MODE",
    "MYSQL8_COLLATION",
    "MYSQL8_GROUP_CONCAT_MAX_LEN",
    "MYSQL8_SQL_MODE",
    "READ_GRACE_S",
    "ConnectParams",
    "Dialect",
    "MySQLBackend",
    "MySQLEpisode",
    "connect",
    "parse_dsn",
]
