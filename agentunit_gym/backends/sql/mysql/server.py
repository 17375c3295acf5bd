"""Where the server lives: a container we start (ours or an image the user names), or a DSN.

- By default a MariaDB container from the project's ``mariadb`` image (Debian's
  mariadb-server, so it builds without a registry), datadir on tmpfs, ``--network none``,
  clients coming through a unix socket in a bind-mounted host directory; or a container of
  an image the user names (``image="mysql:8"``), started the way the official images expect.
- Or an existing server given by a DSN, whose user may create databases and users and grant
  on them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from typing import Any

from agentunit_gym.backends import process
from agentunit_gym.backends.sql.mysql.connection import ConnectParams, connect
from agentunit_gym.errors import BackendTimeoutError, BackendUnavailableError

SOCKET_DIR_IN_CONTAINER = "/run/agentunit"
SOCKET_NAME = "mysqld.sock"
ADMIN_USER = "agentunit_admin"
CONTAINER_LABELS = {"agentunit_gym": "1", "agentunit_gym.role": "sql-server"}

DEFAULT_IMAGE = "mariadb"
"""Name of the project's image directory (``agentunit_gym/images/mariadb``)."""


class Server(ABC):
    """Where the backend's server lives; :meth:`start` returns the admin's connect params."""

    @abstractmethod
    def start(self) -> ConnectParams: ...

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def stop(self) -> None: ...

    @property
    def restartable(self) -> bool:
        return False


class DsnServer(Server):
    def __init__(self, params: ConnectParams) -> None:
        self.params = params

    def start(self) -> ConnectParams:
        return self.params

    def alive(self) -> bool:
        try:
            connect(self.params, connect_timeout=3.0, read_timeout=5.0).close()
        except BackendUnavailableError:
            return False
        return True

    def describe(self) -> str:
        return f"the server at {self.params.describe()}"

    def stop(self) -> None:
        return None


def remove_container(container: Any, workdir: str) -> None:
    """Finalizer: remove the container and its socket directory (also at interpreter exit)."""
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone, or the daemon went away: nothing left to do
        pass
    shutil.rmtree(workdir, ignore_errors=True)


class ContainerServer(Server):
    """A MySQL-compatible server in a container we start, on ``--network none``."""

    def __init__(self, image: str | None, start_timeout: float | None, memory_limit: str,
                 tmpfs_size: str) -> None:
        self.image = image
        self.ours = image is None or image.startswith("agentunit-gym/mariadb")
        self.start_timeout = start_timeout if start_timeout is not None else (60.0 if self.ours else 180.0)
        self.memory_limit = memory_limit
        self.tmpfs_size = tmpfs_size
        self.container: Any = None
        self.name: str | None = None
        self._finalizer: weakref.finalize[[Any, str], ContainerServer] | None = None

    @property
    def restartable(self) -> bool:
        return True

    def _image_tag(self, client: Any) -> str:
        if self.image is None:
            from agentunit_gym.backends.images import ensure_image

            return ensure_image(DEFAULT_IMAGE, client=client)
        docker_errors = process.docker_sdk().errors

        try:
            client.images.get(self.image)
        except docker_errors.ImageNotFound as exc:
            raise BackendUnavailableError(
                f"image {self.image!r} is not on this Docker daemon. Pull it (docker pull {self.image}) "
                "or leave image unset to use the project's MariaDB image."
            ) from exc
        return self.image

    def start(self) -> ConnectParams:
        # The SDK comes with the mysql extra (pymysql and docker): name that extra when it is missing.
        docker_errors = process.docker_sdk("mysql", "The mysql SQL backend's server container").errors

        client = process.docker_client()
        tag = self._image_tag(client)
        workdir = tempfile.mkdtemp(prefix="agentunit-sql-")
        sockdir = os.path.join(workdir, "sock")
        os.mkdir(sockdir)
        # The server runs as its own user inside the container and must create the socket
        # here; the 0700 parent keeps other host users out of the directory.
        os.chmod(sockdir, 0o777)
        password = secrets.token_hex(16)
        user = ADMIN_USER if self.ours else "root"
        environment = ({"AGENTUNIT_ADMIN_PASSWORD": password, "AGENTUNIT_ADMIN_USER": ADMIN_USER} if self.ours
                       else {"MYSQL_ROOT_PASSWORD": password, "MARIADB_ROOT_PASSWORD": password})
        command = None if self.ours else [
            f"--socket={SOCKET_DIR_IN_CONTAINER}/{SOCKET_NAME}", "--skip-networking", "--skip-log-bin",
            "--local-infile=0", "--performance-schema=OFF",
        ]
        self.name = f"agentunit-gym-sql-{uuid.uuid4().hex[:12]}"
        try:
            self.container = client.containers.run(
                tag, command=command, name=self.name, detach=True, labels=CONTAINER_LABELS,
                network_mode="none", init=True, environment=environment, mem_limit=self.memory_limit,
                tmpfs={"/var/lib/mysql": f"rw,size={self.tmpfs_size},mode=0755"},
                volumes={sockdir: {"bind": SOCKET_DIR_IN_CONTAINER, "mode": "rw"}},
            )
        except docker_errors.APIError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise BackendUnavailableError(f"cannot start the SQL server container from {tag}: {exc}") from exc
        self._finalizer = weakref.finalize(self, remove_container, self.container, workdir)
        params = ConnectParams(user=user, password=password, unix_socket=os.path.join(sockdir, SOCKET_NAME))
        self._wait_ready(params, tag)
        return params

    def _wait_ready(self, params: ConnectParams, tag: str) -> None:
        """Poll (with a deadline) until the server accepts the admin login."""
        docker_errors = process.docker_sdk().errors

        deadline = time.monotonic() + self.start_timeout
        last = "the socket did not appear"
        socket_path = params.unix_socket or ""
        while True:
            if os.path.exists(socket_path):
                try:
                    connect(params, connect_timeout=2.0, read_timeout=5.0).close()
                    return
                except BackendUnavailableError as exc:
                    last = str(exc)
            try:
                self.container.reload()
                status = self.container.status
            except docker_errors.NotFound:
                status = "removed"
            if status in ("exited", "dead", "removed"):
                logs = self._logs()
                self.stop()
                raise BackendUnavailableError(
                    f"the SQL server container ({tag}) stopped while starting (status {status}). "
                    f"Last log lines:\n{logs}"
                )
            if time.monotonic() > deadline:
                logs = self._logs()
                self.stop()
                raise BackendTimeoutError(
                    f"the SQL server container ({tag}) was not ready within {self.start_timeout:g} s "
                    f"({last}). Pass a larger start_timeout on a slow machine. Last log lines:\n{logs}"
                )
            time.sleep(0.02)  # poll interval of the readiness check; the deadline bounds it

    def _logs(self) -> str:
        try:
            return str(self.container.logs(tail=20).decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - best effort: logs only enrich an error message
            return "(no logs)"

    def alive(self) -> bool:
        docker_errors = process.docker_sdk().errors

        if self.container is None:
            return False
        try:
            self.container.reload()
        except docker_errors.DockerException:
            return False
        return bool(self.container.status == "running")

    def describe(self) -> str:
        return f"the SQL server container {self.name}"

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs once: removes the container and the socket dir
            self._finalizer = None
        self.container = None
