"""``sparql``: any SPARQL 1.1 endpoint over HTTP (our container, Oxigraph, Virtuoso, Fuseki ...).

Queries go as ``POST application/x-www-form-urlencoded`` (``query=...``, the SPARQL 1.1
protocol), results are read as ``application/sparql-results+json``. Every request has a
deadline for the whole answer (a server that streams a huge result is cut off) and a cap
on the bytes read; connections are kept alive (one per backend, guarded by a lock) so a tool
call costs one round trip. Only ``SELECT`` is sent; nothing reaches the update endpoint.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from typing import Any, ClassVar

from agentunit_gym.backends.sparql.base import (
    ResultTooLargeError,
    SelectResult,
    SPARQLBackend,
    check_query_limits,
    local_name,
)
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, ConfigError

_ACCEPT = "application/sparql-results+json"
_READ_CHUNK = 1 << 16


class HTTPSPARQL(SPARQLBackend):
    """A SPARQL 1.1 endpoint.

    Args:
        endpoint: the query URL, e.g. ``http://127.0.0.1:7878/query`` or Virtuoso's ``.../sparql``.
        connect_timeout: seconds to wait for a connection.
        max_response_bytes: the largest response read; a larger one is cut off and refused.

    Raises:
        ConfigError: the URL is not ``http://`` or ``https://``.
    """

    kind: ClassVar[str] = "sparql"

    def __init__(self, endpoint: str, *, connect_timeout: float = 5.0,
                 max_response_bytes: int = 64 * 1024 * 1024) -> None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"a SPARQL endpoint is an http(s) URL, got {endpoint!r}.")
        self.endpoint = endpoint
        self._parts = parts
        self._path = parts.path or "/"
        if parts.query:
            self._path += "?" + parts.query
        self.connect_timeout = connect_timeout
        self.max_response_bytes = max_response_bytes
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def select(self, query: str, *, timeout: float, limit: int) -> SelectResult:
        check_query_limits(timeout, limit)
        started = time.perf_counter()
        payload = self._post(query, timeout)
        try:
            head = payload["head"]["vars"]
            bindings = payload["results"]["bindings"]
        except (KeyError, TypeError) as exc:
            raise BackendError(f"{self.endpoint} answered without SPARQL JSON results ({exc}).") from exc
        names = tuple(str(v) for v in head)
        rows: list[tuple[str | None, ...]] = []
        truncated = False
        for binding in bindings:
            if len(rows) >= limit:
                truncated = True
                break
            rows.append(tuple(_term(binding.get(name)) for name in names))
        return SelectResult(names, tuple(rows), truncated, time.perf_counter() - started)

    def triple_count(self) -> int:
        result = self.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", timeout=60.0, limit=1)
        return int(result.rows[0][0] or 0) if result.rows else 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ---------------------------------------------------------------- private

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._closed:
            raise BackendUnavailableError("the SPARQL endpoint backend is closed.")
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._parts.hostname or "", self._parts.port, timeout=self.connect_timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn

    def _post(self, query: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        body = urllib.parse.urlencode({"query": query}).encode("utf-8")
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": _ACCEPT}
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection(timeout)
                try:
                    conn.request("POST", self._path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = self._read(response, deadline, timeout)
                    break
                except TimeoutError as exc:
                    self._drop()
                    raise BackendTimeoutError(
                        f"the SPARQL endpoint {self.endpoint} did not answer within {timeout:g} s."
                    ) from exc
                except (http.client.HTTPException, BrokenPipeError, ConnectionResetError) as exc:
                    # A kept-alive connection the server closed, or left in a state http.client
                    # refuses to reuse: retry once on a new connection.
                    self._drop()
                    if attempt == 2:
                        raise BackendUnavailableError(
                            f"the SPARQL endpoint {self.endpoint} closed the connection: {exc}") from exc
                except OSError as exc:
                    self._drop()
                    raise BackendUnavailableError(f"cannot reach the SPARQL endpoint {self.endpoint}: {exc}") from exc
        if response.status != 200:
            text = data[:300].decode("utf-8", errors="replace")
            if response.status in (408, 503, 504) or "timeout" in text.lower():
                raise BackendTimeoutError(f"the SPARQL endpoint {self.endpoint} timed out ({response.status}): {text}")
            raise BackendError(f"the SPARQL endpoint {self.endpoint} refused the query ({response.status}): {text}")
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BackendError(f"{self.endpoint} answered with something that is not JSON ({exc}).") from exc

    def _read(self, response: http.client.HTTPResponse, deadline: float, timeout: float) -> bytes:
        """The whole body, within the deadline and the size cap (a server may stream for long)."""
        parts: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                self._drop()
                raise BackendTimeoutError(f"the SPARQL endpoint {self.endpoint} did not answer within {timeout:g} s.")
            part = response.read1(_READ_CHUNK)
            if not part:
                return b"".join(parts)
            parts.append(part)
            size += len(part)
            if size > self.max_response_bytes:
                self._drop()
                raise ResultTooLargeError(
                    f"the SPARQL endpoint {self.endpoint} sent more than {self.max_response_bytes} bytes.")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _term(cell: Any) -> str | None:
    if not isinstance(cell, dict) or "value" not in cell:
        return None
    return local_name(str(cell["value"]))
