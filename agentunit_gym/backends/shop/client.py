"""The ``server`` shop backend: sessions on a shop server over HTTP (TCP or a unix socket).

The server is either one the user runs (``url="http://host:port"``) or one started in
the project's ``webshop`` image (:meth:`ServerShopBackend.start_container`). The
container runs with no network: it serves on a unix socket in a bind-mounted directory,
reads the search index from the host's cache (mounted read-only; built on the host first
if missing), and runs this package's code, mounted read-only, on Debian's Python, numpy
and scipy (the image holds no copy of the code, so it never goes stale).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from agentunit_gym.backends import process
from agentunit_gym.backends.shop.base import MoveResult, PageView, ShopBackend, ShopSession, goal_to_dict
from agentunit_gym.backends.shop.catalog import DEFAULT_SEED, DEFAULT_SIZE, GeneratedCatalog
from agentunit_gym.backends.shop.reward import GoalSpec
from agentunit_gym.backends.shop.search import SearchIndex, cache_root
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, ConfigError

CONTAINER_LABELS = {"agentunit_gym": "1", "agentunit_gym.role": "shop-server"}
IMAGE = "webshop"
_SOCKET_DIR = "/run/agentunit-shop"
_CODE_DIR = "/opt/agentunit/code"
_CACHE_DIR = "/opt/agentunit/cache"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class ShopClient:
    """A small JSON-over-HTTP client with a deadline on every request."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "unix"):
            raise ConfigError(f"a shop server URL is http://host:port or unix:///path/to/socket, got {url!r}.")
        self.url = url
        self.timeout = timeout
        self._parts = parts

    def _connection(self) -> http.client.HTTPConnection:
        if self._parts.scheme == "unix":
            return _UnixConnection(self._parts.path, self.timeout)
        return http.client.HTTPConnection(self._parts.hostname or "127.0.0.1", self._parts.port or 80,
                                          timeout=self.timeout)

    def request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Send one request; returns the status and the decoded JSON body.

        Raises:
            BackendUnavailableError: the server cannot be reached.
            BackendTimeoutError: no answer within the timeout.
            BackendError: the answer is not JSON.
        """
        body = json.dumps(payload).encode() if payload is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection = self._connection()
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            status = response.status
        except TimeoutError as exc:
            raise BackendTimeoutError(f"the shop server at {self.url} did not answer {method} {path} "
                                      f"within {self.timeout:g} s.") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise BackendUnavailableError(f"cannot reach the shop server at {self.url}: {exc}") from exc
        finally:
            connection.close()
        if not raw:
            return status, {}
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BackendError(f"the shop server at {self.url} answered {method} {path} with non-JSON "
                               f"(HTTP {status}): {raw[:200]!r}") from exc
        if not isinstance(data, dict):
            raise BackendError(f"the shop server at {self.url} answered with a {type(data).__name__}, not an object.")
        return status, data

    def expect(self, method: str, path: str, payload: dict[str, Any] | None = None,
               ok: tuple[int, ...] = (200,)) -> dict[str, Any]:
        status, data = self.request(method, path, payload)
        if status not in ok:
            raise BackendError(f"the shop server at {self.url} refused {method} {path}: HTTP {status} "
                               f"{data.get('error', '')}".strip())
        return data


class ServerSession(ShopSession):
    """A session held by the server."""

    def __init__(self, client: ShopClient, sid: str, view: PageView) -> None:
        self._client = client
        self.sid = sid
        self._view = view
        self._closed = False

    @property
    def view(self) -> PageView:
        return self._view

    def _move(self, verb: str, field: str, argument: str) -> MoveResult:
        data = self._client.expect("POST", f"/api/sessions/{quote(self.sid)}/{verb}", {field: argument})
        self._view = PageView.from_dict(data["view"])
        return MoveResult(self._view, refused=data.get("refused"))

    def search(self, keywords: str) -> MoveResult:
        return self._move("search", "keywords", keywords)

    def click(self, value: str) -> MoveResult:
        return self._move("click", "value", value)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._client.request("DELETE", f"/api/sessions/{quote(self.sid)}")
        except (BackendUnavailableError, BackendTimeoutError, BackendError):
            pass  # the server forgets idle sessions by itself


class ServerShopBackend(ShopBackend):
    """Sessions on a shop server at ``url``.

    Args:
        url: ``http://host:port`` or ``unix:///path``.
        timeout: seconds each request may take.

    Raises:
        BackendUnavailableError: the server does not answer its health check.
    """

    kind = "server"

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.client = ShopClient(url, timeout=timeout)
        health = self.client.expect("GET", "/api/health")
        self._products = int(health.get("products", 0))
        self.catalog_key = str(health.get("catalog", ""))
        self._container: Any = None
        self._finalizer: weakref.finalize[..., ServerShopBackend] | None = None

    @classmethod
    def start_container(cls, *, catalog_size: int | None = None, catalog_seed: int | None = None,
                        start_timeout: float = 120.0, timeout: float = 30.0, client: Any = None) -> ServerShopBackend:
        """Start the shop server in the ``webshop`` image and connect to it.

        The index is built on the host first when the cache has none (it is the same
        index, keyed by the catalog's content hash).

        Raises:
            BackendUnavailableError: no Docker daemon, or the server did not come up in time.
            ImageBuildError: the image could not be built.
        """
        docker_errors = process.docker_sdk().errors

        from agentunit_gym.backends.images import ensure_image

        size = catalog_size or DEFAULT_SIZE
        seed = DEFAULT_SEED if catalog_seed is None else catalog_seed
        catalog = GeneratedCatalog(size, seed)
        root = cache_root()
        if not (SearchIndex.directory(catalog, root) / "params.index.json").is_file():
            SearchIndex.build(catalog, SearchIndex.directory(catalog, root))
        docker = client if client is not None else process.docker_client()
        tag = ensure_image(IMAGE, client=docker)
        workdir = tempfile.mkdtemp(prefix="agentunit-shop-")
        os.chmod(workdir, 0o777)
        package = Path(__file__).resolve().parents[2]  # the agentunit_gym package folder
        import bm25s

        bm25s_dir = Path(bm25s.__file__).resolve().parent
        name = f"agentunit-gym-shop-{uuid.uuid4().hex[:12]}"
        command = ["--unix", f"{_SOCKET_DIR}/shop.sock", "--size", str(size), "--seed", str(seed),
                   "--cache", _CACHE_DIR]
        try:
            container = docker.containers.run(
                tag, command=command, name=name, detach=True, labels=CONTAINER_LABELS, network_mode="none",
                init=True, mem_limit="1g", read_only=True, user="65534:65534",
                volumes={
                    workdir: {"bind": _SOCKET_DIR, "mode": "rw"},
                    str(package): {"bind": f"{_CODE_DIR}/agentunit_gym", "mode": "ro"},
                    str(bm25s_dir): {"bind": f"{_CODE_DIR}/bm25s", "mode": "ro"},
                    str(root): {"bind": _CACHE_DIR, "mode": "ro"},
                },
            )
        except docker_errors.APIError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise BackendUnavailableError(f"cannot start the shop server container from {tag}: {exc}") from exc
        url = f"unix://{workdir}/shop.sock"
        deadline = time.monotonic() + start_timeout
        last = "no socket yet"
        while True:
            if os.path.exists(f"{workdir}/shop.sock"):
                try:
                    backend = cls(url, timeout=timeout)
                    break
                except (BackendUnavailableError, BackendError) as exc:
                    last = str(exc)
            container.reload()
            if container.status in ("exited", "dead") or time.monotonic() > deadline:
                logs = container.logs(tail=30).decode(errors="replace")
                _remove(container, workdir)
                raise BackendUnavailableError(
                    f"the shop server in container {name} did not come up within {start_timeout:g} s "
                    f"(status {container.status}; {last}). Its log:\n{logs}")
            time.sleep(0.05)  # a poll interval under a deadline, not synchronisation
        backend._container = container
        backend._finalizer = weakref.finalize(backend, _remove, container, workdir)
        return backend

    @property
    def container(self) -> Any:
        """The server's container when this backend started one, else None."""
        return self._container

    def open_session(self, goal: GoalSpec) -> ServerSession:
        data = self.client.expect("POST", "/api/sessions", {"goal": goal_to_dict(goal)}, ok=(201,))
        return ServerSession(self.client, str(data["session"]), PageView.from_dict(data["view"]))

    def product_count(self) -> int:
        return self._products

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def _remove(container: Any, workdir: str) -> None:
    docker_errors = process.docker_sdk().errors

    try:
        container.remove(force=True)
    except docker_errors.DockerException:
        pass
    shutil.rmtree(workdir, ignore_errors=True)
