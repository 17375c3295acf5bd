"""A MariaDB server reached by DSN over TCP, as a user's existing server would be.

``AGENTUNIT_MYSQL_DSN`` names one when set; otherwise (with a Docker daemon) a container
from our MariaDB image is started with networking on, an admin account for any host is
created, and its DSN is yielded. This keeps the DSN path tested for real in CI. The container
runs MariaDB's stock settings, not our image's MySQL 8 ones, as a user's server would: the
backend must set MySQL 8's dialect per session.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentunit_gym.backends import process

STOCK_SETTINGS = ("--sql-mode=STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,"
                  "NO_ENGINE_SUBSTITUTION",
                  "--collation-server=utf8mb4_general_ci", "--group-concat-max-len=1048576")
"""MariaDB 10.11's defaults, which our image's configuration changes."""


@contextmanager
def tcp_mariadb(user: str = "tcpadmin", password: str = "tcp pw") -> Iterator[tuple[str, object]]:
    """Start a networked MariaDB container; yield ``(dsn, container)``; remove it after."""
    from urllib.parse import quote

    from agentunit_gym.backends.images import ensure_image

    docker = process.docker_client()
    container = docker.containers.run(
        ensure_image("mariadb"), command=["--skip-networking=0", "--bind-address=0.0.0.0", *STOCK_SETTINGS],
        detach=True,
        labels={"agentunit_gym": "1"}, init=True, environment={"AGENTUNIT_ADMIN_PASSWORD": "unused"},
        tmpfs={"/var/lib/mysql": "rw,size=256m"}, name=f"agentunit-gym-test-tcp-{os.getpid()}-{time.monotonic_ns()}")
    try:
        sql = (f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'; "
               f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%' WITH GRANT OPTION;")
        deadline = time.monotonic() + 30
        while container.exec_run(["mariadb", "-uroot", "-e", sql]).exit_code != 0:  # until the server is up
            if time.monotonic() > deadline:
                raise TimeoutError(f"MariaDB did not come up: {container.logs(tail=20)!r}")
            time.sleep(0.1)
        container.reload()
        ip = container.attrs["NetworkSettings"]["IPAddress"]
        yield f"mysql://{quote(user)}:{quote(password)}@{ip}:3306/", container
    finally:
        container.remove(force=True)


@contextmanager
def external_dsn() -> Iterator[str]:
    """``AGENTUNIT_MYSQL_DSN`` when set, else a fresh networked container's DSN."""
    dsn = os.environ.get("AGENTUNIT_MYSQL_DSN")
    if dsn:
        yield dsn
        return
    with tcp_mariadb() as (container_dsn, _container):
        yield container_dsn


def admin_rows(backend: Any, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` on a fresh admin connection of our own to ``backend``'s server (a
    :class:`~agentunit_gym.backends.sql.mysql.MySQLBackend`), independent of the backend's."""
    from agentunit_gym.backends.sql.mysql import connect

    conn = connect(backend.admin_connect_params())
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()
