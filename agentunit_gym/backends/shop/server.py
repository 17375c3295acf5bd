"""The shop as an HTTP server: a JSON API for envs, and HTML pages people can shop in.

JSON API (what :mod:`agentunit_gym.backends.shop.client` speaks):

- ``GET /api/health`` -> ``{"ok": true, "products": N, "catalog": key}``
- ``POST /api/sessions`` ``{"goal": {...}}`` -> ``{"session": id, "view": {...}}``
- ``GET /api/sessions/<id>`` -> ``{"view": {...}}``
- ``POST /api/sessions/<id>/search`` ``{"keywords": ...}`` and ``/click`` ``{"value": ...}``
  -> ``{"view": {...}, "refused": null | reason}``
- ``DELETE /api/sessions/<id>``

HTML (for people, and for browser agents): ``/session/<id>`` shows the session's page:
the same visible texts as WebShop's text mode, in the same order, with a search box,
links for buttons and products, and option choices; ``/session/<id>/search?keywords=``
and ``/session/<id>/click?value=`` act and redirect back. ``/play/<goal id>`` starts a
session for a goal of the suite the server was given.

Both forms read one :class:`~agentunit_gym.backends.shop.engine.EmbeddedSession` per
session, so the text an env sees over HTTP is the text it sees in process. The server
listens on TCP (``--port``, loopback by default) or on a unix socket (``--unix``), the
form the container uses so it can run without a network.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import secrets
import socketserver
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from agentunit_gym.backends.shop.base import PageView, goal_from_dict
from agentunit_gym.backends.shop.engine import SEP, EmbeddedSession, Shop
from agentunit_gym.backends.shop.reward import GoalSpec

MAX_BODY = 1 << 20
SESSION_TTL_S = 3600.0
MAX_SESSIONS = 10_000


class ShopService:
    """The sessions of one server over one shop (thread-safe)."""

    def __init__(self, shop: Shop, goals: dict[str, GoalSpec] | None = None) -> None:
        self.shop = shop
        self.goals = dict(goals or {})
        self._sessions: dict[str, tuple[EmbeddedSession, threading.Lock]] = {}
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def create(self, goal: GoalSpec) -> tuple[str, PageView]:
        session = EmbeddedSession(self.shop, goal)
        sid = secrets.token_hex(12)
        with self._lock:
            self._sweep()
            self._sessions[sid] = (session, threading.Lock())
            self._used[sid] = time.monotonic()
        return sid, session.view

    def get(self, sid: str) -> tuple[EmbeddedSession, threading.Lock] | None:
        with self._lock:
            found = self._sessions.get(sid)
            if found is not None:
                self._used[sid] = time.monotonic()
            return found

    def delete(self, sid: str) -> bool:
        with self._lock:
            self._used.pop(sid, None)
            return self._sessions.pop(sid, None) is not None

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _sweep(self) -> None:
        now = time.monotonic()
        stale = [sid for sid, used in self._used.items() if now - used > SESSION_TTL_S]
        if len(self._sessions) - len(stale) >= MAX_SESSIONS:
            stale += sorted(self._used, key=self._used.__getitem__)[: len(self._sessions) - MAX_SESSIONS + 1]
        for sid in set(stale):
            self._sessions.pop(sid, None)
            self._used.pop(sid, None)


# ------------------------------------------------------------------ HTML

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#232f3e;color:#fff;padding:12px 24px;font-size:20px}
main{max-width:980px;margin:20px auto;background:#fff;padding:20px 28px;border-radius:8px}
.instruction{background:#fff8e1;border-left:4px solid #f0a500;padding:10px 14px;margin-bottom:16px}
a.btn{display:inline-block;margin:4px 6px 4px 0;padding:6px 12px;background:#2d6cdf;color:#fff;
border-radius:4px;text-decoration:none}
a.buy{background:#f0a500;color:#111;font-weight:bold}
a.opt{background:#e8ecf3;color:#1d2330;border:1px solid #b9c2d3}
a.opt.chosen{background:#1d8f4e;color:#fff}
a.product{font-weight:bold;color:#2d6cdf}
p.text{margin:6px 0}
.score{font-size:28px;font-weight:bold;color:#1d8f4e}
"""


def render_html(sid: str, view: PageView) -> str:
    """The session's page as HTML: the text-mode segments in order, actionable ones as links."""
    base = f"/session/{quote(sid)}"
    chosen = {v.lower() for v in view.options.values()}
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>WebShop</title><style>{_STYLE}</style>"
             "</head><body><header>WebShop</header><main>"]
    segments = view.text.split(SEP)
    clickable = set(view.clickables)
    index = 0
    if segments and segments[0] == "WebShop":
        index = 1
    if index + 1 < len(segments) and segments[index] == "Instruction:":
        parts.append(f"<div class='instruction' id='instruction-text'><b>Instruction:</b> "
                     f"{html.escape(segments[index + 1])}</div>")
        index += 2
    for segment in segments[index:]:
        key = segment.lower()
        if view.page == "search" and segment == "Search":
            parts.append(f"<form action='{base}/search' method='get' id='search-form'>"
                         "<input type='text' id='search_input' name='keywords' size='50' autofocus> "
                         "<button type='submit' class='btn'>Search</button></form>")
        elif key in clickable:
            href = f"{base}/click?value={quote(segment)}"
            if view.page == "results" and key not in ("back to search", "< prev", "next >"):
                cls = "product product-link"
            elif key == "buy now":
                cls = "btn buy"
            elif view.page == "item" and key not in ("back to search", "< prev", "description", "features",
                                                     "reviews"):
                cls = "btn opt chosen" if key in chosen else "btn opt"
            else:
                cls = "btn"
            parts.append(f"<a class='{cls}' href='{html.escape(href)}'>{html.escape(segment)}</a>")
        elif view.page == "done" and view.reward is not None and segment == f"{view.reward}":
            parts.append(f"<p class='score' id='reward'>{html.escape(segment)}</p>")
        else:
            parts.append(f"<p class='text'>{html.escape(segment)}</p>")
    parts.append("</main></body></html>")
    return "".join(parts)


# --------------------------------------------------------------- handler


def make_handler(service: ShopService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "agentunit-gym-shop/1"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass  # quiet: a shop server answers thousands of requests an episode run

        # ---- plumbing

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            self._send(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json")

        def _error(self, status: int, message: str) -> None:
            self._json(status, {"error": message})

        def _body(self) -> dict[str, Any] | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._error(HTTPStatus.BAD_REQUEST, "missing or oversized body")
                return None
            try:
                data = json.loads(self.rfile.read(length) or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._error(HTTPStatus.BAD_REQUEST, "the body is not JSON")
                return None
            if not isinstance(data, dict):
                self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
                return None
            return data

        def _route(self) -> tuple[list[str], dict[str, list[str]]]:
            url = urlsplit(self.path)
            return [p for p in url.path.split("/") if p], parse_qs(url.query)

        # ---- verbs

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            parts, query = self._route()
            if parts == ["api", "health"]:
                self._json(HTTPStatus.OK, {"ok": True, "products": len(service.shop.catalog),
                                           "catalog": service.shop.catalog.key,
                                           "sessions": service.session_count})
            elif len(parts) == 3 and parts[:2] == ["api", "sessions"]:
                found = service.get(parts[2])
                if found is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session")
                else:
                    self._json(HTTPStatus.OK, {"view": found[0].view.to_dict()})
            elif not parts:
                goals = "".join(f"<li><a href='/play/{quote(g)}'>{html.escape(g)}</a></li>"
                                for g in sorted(service.goals)[:1000])
                body = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>WebShop</title>"
                        f"<style>{_STYLE}</style></head><body><header>WebShop</header><main>"
                        f"<p>{len(service.shop.catalog)} products.</p><ul>{goals}</ul></main></body></html>")
                self._send(HTTPStatus.OK, body.encode(), "text/html; charset=utf-8")
            elif len(parts) == 2 and parts[0] == "play":
                goal = service.goals.get(parts[1])
                if goal is None:
                    self._send(HTTPStatus.NOT_FOUND, b"no such goal", "text/plain")
                    return
                sid, _ = service.create(goal)
                self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": f"/session/{sid}"})
            elif len(parts) >= 2 and parts[0] == "session":
                self._html_session(parts[1], parts[2:], query)
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

        def do_HEAD(self) -> None:  # noqa: N802
            self.do_GET()

        def _html_session(self, sid: str, rest: list[str], query: dict[str, list[str]]) -> None:
            found = service.get(sid)
            if found is None:
                self._send(HTTPStatus.NOT_FOUND, b"no such session", "text/plain")
                return
            session, lock = found
            if rest in (["search"], ["click"]):
                with lock:
                    if rest == ["search"]:
                        session.search((query.get("keywords") or [""])[0])
                    else:
                        session.click((query.get("value") or [""])[0])
                self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": f"/session/{sid}"})
                return
            if rest:
                self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
                return
            with lock:
                view = session.view
            self._send(HTTPStatus.OK, render_html(sid, view).encode(), "text/html; charset=utf-8")

        def do_POST(self) -> None:  # noqa: N802
            parts, _ = self._route()
            body = self._body()
            if body is None:
                return
            if parts == ["api", "sessions"]:
                try:
                    goal = goal_from_dict(body["goal"])
                except (KeyError, TypeError) as exc:
                    self._error(HTTPStatus.BAD_REQUEST, f"a session needs a goal object: {exc}")
                    return
                sid, view = service.create(goal)
                self._json(HTTPStatus.CREATED, {"session": sid, "view": view.to_dict()})
                return
            if len(parts) == 4 and parts[:2] == ["api", "sessions"] and parts[3] in ("search", "click"):
                found = service.get(parts[2])
                if found is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session")
                    return
                session, lock = found
                field = "keywords" if parts[3] == "search" else "value"
                argument = body.get(field)
                if not isinstance(argument, str):
                    self._error(HTTPStatus.BAD_REQUEST, f"{parts[3]} needs a string {field!r}")
                    return
                with lock:
                    result = session.search(argument) if parts[3] == "search" else session.click(argument)
                self._json(HTTPStatus.OK, {"view": result.view.to_dict(), "refused": result.refused})
                return
            self._error(HTTPStatus.NOT_FOUND, "not found")

        def do_DELETE(self) -> None:  # noqa: N802
            parts, _ = self._route()
            if len(parts) == 3 and parts[:2] == ["api", "sessions"]:
                service.delete(parts[2])
                self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")
            else:
                self._error(HTTPStatus.NOT_FOUND, "not found")

    return Handler


class _QuietErrors:
    """A client that hangs up mid-answer is its business, not an error worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[misc]


class _TCPServer(_QuietErrors, ThreadingHTTPServer):
    daemon_threads = True


class _UnixHTTPServer(_QuietErrors, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port) client address


class ShopServer:
    """A running shop server (in a thread of this process, or the main loop of ``main``).

    Args:
        service: the sessions and shop to serve.
        host, port: TCP address (port 0: a free port is chosen); ignored with ``unix``.
        unix: a unix socket path to listen on instead of TCP.
    """

    def __init__(self, service: ShopService, *, host: str = "127.0.0.1", port: int = 0,
                 unix: str | None = None) -> None:
        handler = make_handler(service)
        self.service = service
        self._httpd: socketserver.BaseServer
        if unix is not None:
            if os.path.exists(unix):
                os.unlink(unix)
            self._httpd = _UnixHTTPServer(unix, handler)
            os.chmod(unix, 0o666)
            self.url = f"unix://{unix}"
        else:
            tcp = _TCPServer((host, port), handler)
            self._httpd = tcp
            bound_host, bound_port = tcp.server_address[:2]
            shown = bound_host if isinstance(bound_host, str) else bound_host.decode()
            self.url = f"http://{shown}:{bound_port}"
        self._thread: threading.Thread | None = None

    def start(self) -> ShopServer:
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="shop-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def serve_until_interrupted(self) -> None:
        """Block until Ctrl-C (the serving thread keeps answering meanwhile)."""
        stop = threading.Event()
        try:
            while not stop.wait(3600):
                pass
        except KeyboardInterrupt:
            return

    def close(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ShopServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None, *, on_ready: Callable[[str], None] | None = None) -> int:
    """``python -m agentunit_gym.backends.shop.server``: serve a generated catalog."""
    from agentunit_gym.backends.shop.catalog import DEFAULT_SEED, DEFAULT_SIZE, GeneratedCatalog

    parser = argparse.ArgumentParser(description="Serve the WebShop shop over HTTP.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--unix", default=None, help="listen on this unix socket instead of TCP")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--cache", default=None, help="cache root holding the search index")
    args = parser.parse_args(argv)
    shop = Shop.open(GeneratedCatalog(args.size, args.seed), cache_root=Path(args.cache) if args.cache else None)
    server = ShopServer(ShopService(shop), host=args.host, port=args.port, unix=args.unix)
    print(f"serving {len(shop.catalog)} products at {server.url}", flush=True)
    if on_ready is not None:
        on_ready(server.url)
    try:
        server.serve_forever()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
