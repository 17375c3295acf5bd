"""A loopback HTTP proxy that records what a model is sent and what it answers.

Put it in front of any OpenAI-compatible server to see, request by request, the exact
messages, tools and settings a model receives (the evaluator's prompt as it leaves the
client, after every wrapper and the chat template's input), and the raw answer with its
``finish_reason``. Each exchange is one JSON line: ``{"path", "request", "status",
"response", "elapsed_s"}``.

Example (in front of the package's fake endpoint; ``log=Path("exchanges.jsonl")`` also writes the lines):

    >>> from agentunit_gym.eval.agents.fake_server import FakeChatServer
    >>> from agentunit_gym.eval.agents.model_client import ModelClient
    >>> from agentunit_gym.eval.agents.model_config import OpenAIConfig
    >>> with FakeChatServer(lambda body: {"role": "assistant", "content": "42"}) as server:
    ...     with RecordingProxy(server.base_url.removesuffix("/v1")) as proxy:
    ...         # point the agent at proxy.base_url ("http://127.0.0.1:<port>/v1")
    ...         _ = ModelClient(OpenAIConfig(model="fake", base_url=proxy.base_url)).complete_sync(
    ...             [{"role": "user", "content": "Say 42"}])
    >>> exchange = proxy.exchanges[0]
    >>> exchange["request"]["messages"], exchange["status"], exchange["response"]["choices"][0]["message"]["content"]
    ([{'role': 'user', 'content': 'Say 42'}], 200, '42')

From a shell: ``python -m agentunit_gym.eval.agents.recording_proxy --upstream http://127.0.0.1:8080
--log exchanges.jsonl`` prints the proxy's base URL and serves until interrupted.

Every upstream request has a deadline (``timeout_s``); an upstream that does not answer in
time, or refuses the connection, is answered with a 502 that says so (and recorded), so a
client behind the proxy sees an endpoint failure, never a hang.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 600.0
"""Deadline of one forwarded request (a small model on a CPU can take minutes for a long reply)."""


class RecordingProxy:
    """Forwards ``GET`` and ``POST`` under ``/v1`` to ``upstream`` and records each exchange.

    Args:
        upstream: the server's root (``http://127.0.0.1:8080``), without ``/v1``.
        log: a JSONL file to append each exchange to; None keeps them in :attr:`exchanges` only.
        timeout_s: deadline of one forwarded request.
        port: the port to listen on (0: a free one).
    """

    def __init__(self, upstream: str, *, log: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.log = log
        self.timeout_s = timeout_s
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        """The proxy's OpenAI base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The request bodies of every ``/chat/completions`` call so far, in arrival order."""
        with self._lock:
            return [e["request"] for e in self.exchanges if str(e["path"]).endswith("/chat/completions")]

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)

    def _record(self, exchange: dict[str, Any]) -> None:
        with self._lock:
            self.exchanges.append(exchange)
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(exchange, ensure_ascii=False) + "\n")

    def _forward(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes, str]:
        request = urllib.request.Request(self.upstream + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                return int(resp.status), resp.read(), resp.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Content-Type", "application/json")
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            message = f"recording proxy: the upstream {self.upstream} did not answer ({type(exc).__name__}: {reason})"
            return 502, json.dumps({"error": {"message": message, "type": "upstream_error"}}).encode(), \
                "application/json"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _relay(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                raw = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization", "accept")}
                started = time.monotonic()
                status, data, content_type = proxy._forward(method, self.path, raw, headers)
                proxy._record({"path": self.path, "request": _json(raw), "status": status,
                               "response": _json(data), "elapsed_s": round(time.monotonic() - started, 3)})
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up

            def do_GET(self) -> None:
                self._relay("GET")

            def do_POST(self) -> None:
                self._relay("POST")

        return Handler


def _json(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")[:2000]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record what an OpenAI-compatible server is sent and answers.")
    parser.add_argument("--upstream", required=True, help="the server's root, e.g. http://127.0.0.1:8080")
    parser.add_argument("--log", type=Path, required=True, help="JSONL file the exchanges are appended to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="deadline of one request (s)")
    args = parser.parse_args(argv)
    proxy = RecordingProxy(args.upstream, log=args.log, timeout_s=args.timeout, port=args.port)
    print(proxy.base_url, flush=True)
    try:
        proxy._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        proxy._server.server_close()
    return 0


__all__ = ["DEFAULT_TIMEOUT_S", "RecordingProxy", "main"]

if __name__ == "__main__":  # pragma: no cover - the CLI entry point
    raise SystemExit(main())
