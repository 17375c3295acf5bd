"""ASGI middleware in front of the OpenEnv app: the bearer token, request sizes, the session cap.

Pure ASGI (no framework), so it sees WebSocket handshakes and frames before OpenEnv does:

- HTTP requests without the token get 401, but for ``GET /health``, which answers only
  ``{"status":"healthy"}`` (a readiness probe: OpenEnv's Docker provider sends no token);
  bodies over the limit 413 (read to their end first, so the client reads the answer rather
  than a reset connection).
- WebSocket handshakes without the token get 401. Session handshakes are admitted one at a
  time; over the session cap one waits up to ``queue_timeout_s`` for a session to end, then gets
  503 with ``Retry-After``: an HTTP response to the handshake where the server supports it
  (uvicorn does), else a close with code 1008 (policy) or 1013 (try again later) and the reason.
- A WebSocket message over the limit is answered with an ``error`` message (code
  ``MESSAGE_TOO_LARGE``) and dropped; the session goes on.

Example (the server puts it in front of OpenEnv's app; here, in front of a tiny one):

    >>> from starlette.responses import PlainTextResponse
    >>> from starlette.testclient import TestClient
    >>> app = Guard(PlainTextResponse("hi"), token="s3cret", max_request_bytes=1 << 10, busy_reason=lambda: None)
    >>> client = TestClient(app)
    >>> client.get("/").status_code, client.get("/", headers={"Authorization": "Bearer s3cret"}).text
    (401, 'hi')
    >>> client.post("/", content=b"x" * 2048, headers={"Authorization": "Bearer s3cret"}).status_code
    413
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

QUEUE_POLL_S = 0.02
"""How often a queued session request looks for a free session."""

SETTLE_S = 5.0
"""How long the queue waits for an admitted request's session to open before it admits the next."""

RETRY_AFTER_S = 1
"""Seconds a refused session request is told to wait (``Retry-After``) before it asks again."""

DRAIN_LIMIT = 256 << 20
"""An oversized body is read and dropped up to this many bytes before the 413 is sent."""

SESSION_PATHS = ("/ws", "/mcp")
"""WebSocket paths that open a session (and so count against the cap)."""


LIVENESS_BODY = b'{"status":"healthy"}'
"""What ``GET /health`` answers a request without the token when the server has one: that it
listens, and nothing else (the full answer, env id, tasks and sessions, needs the token)."""


def _is_liveness_probe(scope: Scope) -> bool:
    return scope.get("method") in ("GET", "HEAD") and scope.get("path", "").rstrip("/") == "/health"


def bearer_ok(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    """Whether the request's ``Authorization`` header is ``Bearer <token>`` (compared in constant time)."""
    expected = f"Bearer {token}".encode()
    for name, value in headers:
        if name.lower() == b"authorization":
            return hmac.compare_digest(value.strip(), expected)
    return False


def _error_body(message: str, code: str) -> bytes:
    return json.dumps({"detail": message, "code": code}).encode()


class Guard:
    """The middleware (see the module docstring).

    Args:
        app: the app behind it.
        token: the bearer token every request must carry; None lets every request through.
        max_request_bytes: the largest HTTP body or WebSocket message.
        busy_reason: why a new session would be refused now, None when it would be accepted.
        queue_timeout_s: how long a session request waits for a free session (0: refused at once).
        opened: how many sessions have been opened so far (it grows when an admitted request's
            session opens); needed with ``queue_timeout_s``.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, max_request_bytes: int,
                 busy_reason: Callable[[], str | None], queue_timeout_s: float = 0.0,
                 opened: Callable[[], int] | None = None) -> None:
        self.app = app
        self.token = token
        self.max_request_bytes = max_request_bytes
        self.busy_reason = busy_reason
        self.queue_timeout_s = queue_timeout_s if opened is not None else 0.0
        self._opened = opened
        self._queue: asyncio.Lock | None = None  # made on the server's loop, at the first wait
        self.queued = 0
        """Session requests waiting for a free session now."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _auth_error(self, scope: Scope) -> str | None:
        token = self.token
        if token is None or bearer_ok(scope.get("headers", []), token):
            return None
        has_header = any(n.lower() == b"authorization" for n, _ in scope.get("headers", []))
        found = "a wrong token" if has_header else "no Authorization header"
        return (f"this server needs the header 'Authorization: Bearer <token>' (the token given to "
                f"agentunit-gym serve --token); the request had {found}.")

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        auth = self._auth_error(scope)
        if auth is not None and _is_liveness_probe(scope):
            # Readiness probes carry no token (OpenEnv's Docker provider waits on GET /health
            # before it hands out the URL, as does a container orchestrator): they learn that
            # the server listens, nothing of what it serves.
            await _respond(send, 200, LIVENESS_BODY if scope.get("method") == "GET" else b"")
            return
        if auth is not None:
            await _respond(send, 401, _error_body(auth, "UNAUTHORIZED"), [(b"www-authenticate", b"Bearer")])
            return
        limit = self.max_request_bytes
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            body = bytearray()
            size = 0
            while True:
                event = await receive()
                if event["type"] == "http.disconnect":
                    return
                chunk = event.get("body", b"")
                size += len(chunk)
                if size <= limit:
                    body += chunk
                elif size > DRAIN_LIMIT:
                    break  # stop reading a flood: answer now, the client may see its upload cut
                if not event.get("more_body", False):
                    break
            if size > limit:
                # The body was read (and dropped) to its end, so the client reads the answer
                # instead of a reset connection.
                await _respond(send, 413, _error_body(_too_large(size, limit), "REQUEST_TOO_LARGE"))
                return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = self._auth_error(scope)
        if reason is not None:
            await _deny(scope, receive, send, 401, 1008, reason)
            return
        if scope.get("path", "").rstrip("/") in SESSION_PATHS:
            if self.queue_timeout_s > 0:
                # Every session request takes its turn, free place or not: one admitted while
                # another's session is still opening would take the same place (two open, one
                # then refused by OpenEnv's own cap, after its accept and without Retry-After).
                await self._queued(scope, receive, send)
                return
            reason = self.busy_reason()
            if reason is not None:
                await _deny(scope, receive, send, 503, 1013, reason)
                return
        await self._session(scope, receive, send)

    async def _queued(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A session request: wait for a free session, up to ``queue_timeout_s``; admitted, hold
        the queue until its session opens, so the next one does not take the same free place.
        Not first come, first served: whoever looks first after the queue frees goes next."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.queue_timeout_s
        if self._queue is None:
            self._queue = asyncio.Lock()
        session: asyncio.Future[None] | None = None
        self.queued += 1
        try:
            session = await self._admit(scope, receive, send, deadline)
        finally:
            self.queued -= 1
        if session is not None:
            await session
            return
        reason = self.busy_reason() or "the env server had no free session"
        waited = f" (waited {self.queue_timeout_s:g} s for one)" if self.queue_timeout_s else ""
        await _deny(scope, receive, send, 503, 1013, reason.rstrip(".") + waited + ".")

    async def _admit(self, scope: Scope, receive: Receive, send: Send, deadline: float) -> asyncio.Future[None] | None:
        """The admitted request's session (running), or None when none was free by ``deadline``."""
        loop = asyncio.get_running_loop()
        assert self._queue is not None
        session: asyncio.Future[None] | None = None
        while self._queue.locked() and loop.time() < deadline:  # another request holds the queue
            await asyncio.sleep(QUEUE_POLL_S)
        if not self._queue.locked():
            # Free: acquire() returns at once, nothing runs between the check and it (no timeout
            # around it either, which could cancel it after it took the lock).
            await self._queue.acquire()
            try:
                while (reason := self.busy_reason()) is not None and loop.time() < deadline:
                    await asyncio.sleep(min(QUEUE_POLL_S, max(0.0, deadline - loop.time())))
                if reason is None and self._opened is not None:  # (queue_timeout_s is 0 without it)
                    before = self._opened()
                    session = asyncio.ensure_future(self._session(scope, receive, send))
                    settle = loop.time() + SETTLE_S
                    while self._opened() == before and not session.done() and loop.time() < settle:
                        await asyncio.sleep(QUEUE_POLL_S)
            except BaseException:
                if session is not None:  # cancelled while its session opened: it goes too
                    session.cancel()
                raise
            finally:
                self._queue.release()
        return session

    async def _session(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_request_bytes

        async def guarded_receive() -> Message:
            while True:
                event = await receive()
                if event["type"] != "websocket.receive":
                    return event
                size = _frame_bytes(event)
                if size <= limit:
                    return event
                message = {"type": "error", "data": {"message": _too_large(size, limit), "code": "MESSAGE_TOO_LARGE"}}
                await send({"type": "websocket.send", "text": json.dumps(message)})

        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, guarded_receive, send)
        except WebSocketDisconnect:
            # OpenEnv closes the socket after the session ends even when the client has gone
            # already; that is a normal end, not an error to log.
            pass


def _too_large(size: int, limit: int) -> str:
    return (f"the request has {size} bytes, over this server's limit of {limit} bytes; send a shorter reply "
            "(or start the server with a higher --max-request-bytes).")


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, code: int, reason: str) -> None:
    """Refuse a WebSocket handshake: an HTTP response when the server supports it, else a close."""
    event = await receive()
    if event["type"] != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        body = _error_body(reason, "UNAUTHORIZED" if status == 401 else "CAPACITY_REACHED")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 503:
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": code, "reason": reason[:120]})




def _frame_bytes(event: Message) -> int:
    """The size of a received WebSocket frame in bytes."""
    if event.get("bytes") is not None:
        return len(event["bytes"])
    return len((event.get("text") or "").encode("utf-8"))
