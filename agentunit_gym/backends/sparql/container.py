"""The ``kg`` image (Oxigraph's SPARQL server holding the bundled graph) and its containers.

The image's build context is generated (the KG domain declares it, ``DomainImage(generator=...)``,
and its ``image`` module writes it; see :mod:`agentunit_gym.backends.images`): the shipped
``images/kg/`` folder plus the bundled graph as gzipped N-Triples and the ``oxigraph`` server
binary (:func:`oxigraph_binary`, from PyPI's ``oxigraph`` wheel installed beside this package:
``pip install "agentunit-gym[kg-server]"``). The graph is loaded into the image's store at
build time, so a container answers as soon as it listens.

:class:`SPARQLContainer` runs one container of it, loopback-published on a port Docker
picks, labelled like every container of ours, and removes it on ``close()``.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from agentunit_gym.backends.images import LABEL, ensure_image
from agentunit_gym.backends.sparql.http import HTTPSPARQL
from agentunit_gym.errors import BackendUnavailableError, MissingDependencyError

IMAGE = "kg"
CONTAINER_PORT = "7878/tcp"
_READY_TIMEOUT_S = 60.0


def _is_executable_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def oxigraph_binary() -> Path:
    """The ``oxigraph`` server binary of the current Python environment.

    Raises:
        MissingDependencyError: it is not installed (the pip line of the ``kg-server`` extra).
    """
    candidates = [Path(p) / "bin" / "oxigraph" for p in dict.fromkeys((sys.prefix, sys.base_prefix))]
    try:
        files = importlib.metadata.distribution("oxigraph").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    candidates += [Path(str(f.locate())) for f in files if f.name == "oxigraph" and f.parent.name == "bin"]
    found = shutil.which("oxigraph")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        # The image needs the server itself: a version manager's shim (pyenv's is a shell
        # script) found on PATH would be copied in and fail there.
        if path.is_file() and _is_executable_binary(path):
            return path
    raise MissingDependencyError("oxigraph", "kg-server", "The kg image (the Oxigraph server binary it serves with)")


class SPARQLContainer:
    """One container of the ``kg`` image, serving SPARQL on a loopback port.

    Args:
        client: a Docker client (default: the environment's daemon).
        timeout_s: the server's per-query time limit.

    Raises:
        BackendUnavailableError: no Docker daemon, or the server did not answer in time.
        ImageBuildError: the image could not be built.
    """

    def __init__(self, *, client: Any | None = None, timeout_s: float = 30.0) -> None:
        from agentunit_gym.backends.process import docker_client

        self._client = client if client is not None else docker_client()
        tag = ensure_image(IMAGE, client=self._client)
        self.container: Any = self._client.containers.run(
            tag, command=["--timeout-s", str(int(max(1, timeout_s)))], detach=True,
            name=f"agentunit-kg-{uuid.uuid4().hex[:12]}", labels={LABEL: "1"},
            ports={CONTAINER_PORT: ("127.0.0.1", None)}, mem_limit="2g", pids_limit=4096,
        )
        try:
            self.endpoint = self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self.container.reload()
            if self.container.status == "exited":
                logs = self.container.logs(tail=20).decode("utf-8", errors="replace")
                raise BackendUnavailableError(f"the kg SPARQL container exited at start:\n{logs}")
            ports = (self.container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
            bound = ports.get(CONTAINER_PORT)
            if bound:
                endpoint = f"http://127.0.0.1:{bound[0]['HostPort']}/query"
                probe = endpoint + "?query=ASK%7B%7D"
                try:
                    with urllib.request.urlopen(probe, timeout=2) as response:
                        if response.status == 200:
                            return endpoint
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.1)  # poll interval of a readiness wait with a deadline
        raise BackendUnavailableError(f"the kg SPARQL container did not answer within {_READY_TIMEOUT_S:g} s.")

    def close(self) -> None:
        """Remove the container. Idempotent."""
        container, self.container = self.container, None
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone, or the daemon went away: nothing left to do
                pass

    def __enter__(self) -> SPARQLContainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ContainerSPARQL(HTTPSPARQL):
    """The ``sparql`` backend on a ``kg`` container of its own (started here, removed on ``close()``).

    Raises:
        BackendUnavailableError: no Docker daemon, or the server did not answer in time.
        ImageBuildError: the image could not be built.
    """

    def __init__(self, *, client: Any | None = None, timeout_s: float = 30.0) -> None:
        self._container = SPARQLContainer(client=client, timeout_s=timeout_s)
        super().__init__(self._container.endpoint)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._container.close()
