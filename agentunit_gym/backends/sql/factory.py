"""Pick and open a SQL backend by name: ``auto``, ``mysql`` or ``sqlite``."""

from __future__ import annotations

import logging
import os
from typing import Any

from agentunit_gym.backends import process
from agentunit_gym.backends.sql.base import SQLBackend
from agentunit_gym.errors import ConfigError

logger = logging.getLogger("agentunit_gym")

DSN_ENV = "AGENTUNIT_MYSQL_DSN"
"""Environment variable that may name an existing MySQL/MariaDB server (a DSN)."""

KINDS = ("auto", "mysql", "sqlite")


def open_sql_backend(kind: str = "auto", *, dsn: str | None = None, **options: Any) -> SQLBackend:
    """Open the SQL backend ``kind``.

    ``auto`` chooses the mysql backend when a DSN is given (argument or
    ``$AGENTUNIT_MYSQL_DSN``) or a Docker daemon answers (a MariaDB container), else the
    embedded SQLite backend, and logs one line saying which (logger ``agentunit_gym``).

    Args:
        kind: ``"auto"``, ``"mysql"`` or ``"sqlite"``.
        dsn: an existing server, ``mysql://user:pass@host:port/``; defaults to
            ``$AGENTUNIT_MYSQL_DSN`` for ``auto`` and ``mysql`` unless an ``image`` is given.
        **options: passed to the backend's constructor (``image``, ``start_timeout``... for
            mysql); options meant for the mysql backend are ignored when ``auto`` falls back
            to SQLite.

    Returns:
        The backend, ready for ``open_episode``.

    Raises:
        ConfigError: unknown kind, or a DSN or options given to the sqlite backend.
        BackendUnavailableError / BackendTimeoutError / ImageBuildError: the mysql backend
            could not start its server.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown SQL backend {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "sqlite":
        if dsn is not None or options:
            raise ConfigError(f"the sqlite backend takes no dsn or options (got {sorted(options) or 'dsn'})")
        return _sqlite()
    env_dsn = os.environ.get(DSN_ENV) or None
    # An explicit image asks for a container: the environment's DSN does not override it.
    use_dsn = dsn if dsn is not None else (None if "image" in options else env_dsn)
    if kind == "mysql":
        return _mysql(use_dsn, options)
    if use_dsn is not None:
        source = "dsn argument" if dsn is not None else f"${DSN_ENV}"
        logger.info("SQL backend: mysql on an existing server (%s)", source)
        return _mysql(use_dsn, options)
    if process.docker_available():
        logger.info("SQL backend: mysql in a container (a Docker daemon answers)")
        return _mysql(None, options)
    logger.info("SQL backend: sqlite (%s, and no %s is set)", process.docker_absence(), DSN_ENV)
    return _sqlite()


def _sqlite() -> SQLBackend:
    from agentunit_gym.backends.sql.sqlite import SQLiteBackend

    return SQLiteBackend()


def _mysql(dsn: str | None, options: dict[str, Any]) -> SQLBackend:
    from agentunit_gym.backends.sql.mysql import MySQLBackend

    return MySQLBackend(dsn=dsn, **options)
