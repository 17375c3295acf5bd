"""A fake OpenAI-compatible chat server on loopback, for tests and benchmarks without a model.

Real HTTP (``http.server`` in a thread), the ``/v1/chat/completions`` shape (also streamed as
server-sent events when the request asks ``stream: true``), ``usage`` in every answer, an
optional delay per request (to simulate model latency), scripted failures (status codes to
return first) to exercise retries, and a context window that runs out after a number of
answers (OpenAI's 400 ``context_length_exceeded``)::

    def reply(body):  # the request body -> the assistant message
        return {"role": "assistant", "content": "Act: answer(42)"}

    with FakeChatServer(reply, latency_s=0.5) as server:
        agent = OpenAIChatAgent(OpenAIConfig(model="fake", base_url=server.base_url))
        reply = asyncio.run(agent.act("Task: say 42", {}))   # the agent is asynchronous
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], dict[str, Any]]
"""Maps a request body to the assistant ``message`` to answer with. A ``finish_reason`` key in
the message is taken out and sent as the choice's finish reason (``length`` for a reply cut at
``max_tokens``); default ``stop`` (``tool_calls`` when the message has tool calls)."""


class FakeChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1 (a free port).

    Args:
        responder: builds the assistant message from the request body.
        latency_s: seconds to wait before answering each request.
        failures: HTTP status codes to answer with, in order, before answering normally.
        prompt_tokens_per_char: how ``usage.prompt_tokens`` is derived from the prompt size.
        context_limit_after: answer this many requests normally (counted over the server,
            not per conversation), then refuse every later one as OpenAI refuses a
            conversation longer than the model's context: HTTP 400 with
            ``error.code == "context_length_exceeded"``. None: never.
        retry_after: the ``Retry-After`` header (seconds) of a scripted 429.
        refuse_response_format: answer a request that has ``response_format`` with this status:
            400, saying the parameter is not supported (as OpenAI-compatible servers without
            structured output do), or 500 with a request validation error naming it (as
            llama-cpp-python's server answers a ``json_schema`` one); None: never.

    ``arrivals`` holds each request's arrival time (``time.monotonic()``), beside ``statuses``;
    ``headers`` each request's headers (names in lower case).
    """

    def __init__(self, responder: Responder, *, latency_s: float = 0.0, failures: Iterable[int] = (),
                 prompt_tokens_per_char: float = 0.25, context_limit_after: int | None = None,
                 retry_after: str = "0", refuse_response_format: int | None = None) -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.failures: deque[int] = deque(failures)
        self.ratio = prompt_tokens_per_char
        self.context_limit_after = context_limit_after
        self._answered = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []
        self.arrivals: list[float] = []
        self.retry_after = retry_after
        self.refuse_response_format = refuse_response_format
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)

    @property
    def base_url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.arrivals.append(time.monotonic())
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    status: int = server.failures.popleft() if server.failures else 200
                    overflow = (status == 200 and server.context_limit_after is not None
                                and server._answered >= server.context_limit_after)
                    refused_format = (status == 200 and not overflow and server.refuse_response_format is not None
                                      and "response_format" in body)
                    if overflow:
                        status = 400
                    elif refused_format:
                        status = int(server.refuse_response_format or 400)
                    elif status == 200:
                        server._answered += 1
                    server.statuses.append(status)
                if server.latency_s:
                    time.sleep(server.latency_s)
                if not self.path.endswith("/chat/completions"):
                    status, overflow, refused_format = 404, False, False
                if overflow:
                    self._send(400, {"error": {
                        "message": "This model's maximum context length is 8192 tokens. However, your messages "
                                   "resulted in 8193 tokens. Please reduce the length of the messages.",
                        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
                    return
                if refused_format and status == 500:
                    self._send(500, {"error": {"type": "internal_server_error", "message": (
                        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")}})
                    return
                if refused_format:
                    self._send(status, {"error": {"message": "Unrecognized request argument supplied: response_format",
                                                  "type": "invalid_request_error", "param": "response_format"}})
                    return
                if status != 200:
                    self._send(status, {"error": {"message": f"scripted status {status}", "code": status}},
                               {"Retry-After": server.retry_after} if status == 429 else {})
                    return
                message = dict(server.responder(body))
                finish = str(message.pop("finish_reason", None) or ("tool_calls" if message.get("tool_calls")
                                                                     else "stop"))
                prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
                completion = str(message.get("content") or "") + json.dumps(message.get("tool_calls") or "")
                prompt_tokens = int(prompt_chars * server.ratio) + 1
                completion_tokens = max(1, len(completion) // 4)
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens,
                         "completion_tokens_details": {"reasoning_tokens": 0}}
                if body.get("stream"):
                    self._stream(body, message, usage, finish)
                    return
                self._send(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                 "usage": usage})

            def _stream(self, body: dict[str, Any], message: dict[str, Any], usage: dict[str, Any],
                        finish: str) -> None:
                # OpenAI's server-sent events: the whole message as one delta, then the finish
                # reason, then (stream_options.include_usage) the usage, then [DONE].
                base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": body.get("model")}
                delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if message.get("tool_calls"):
                    delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
                events = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                          {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
                if (body.get("stream_options") or {}).get("include_usage"):
                    events.append({**base, "choices": [], "usage": usage})
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self._send_raw(200, data.encode(), "text/event-stream")

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(self, status: int, data: bytes, content_type: str,
                          headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its deadline passed): nothing to answer

        return Handler


def reference_responder(solutions: dict[str, list[tuple[str, dict[str, Any], str]]]) -> Responder:
    """A responder that plays each task's reference solution, found by the task's instruction.

    Args:
        solutions: instruction -> the reference steps as ``(tool, arguments, react_text)``.

    Returns:
        A responder answering with text (react mode) or a tool call (when the request has tools).
    """
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages", [])
        text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("user", "system"))
        matches = [i for i in solutions if i in text]
        if not matches:
            return {"role": "assistant", "content": "I cannot tell which task this is."}
        steps = solutions[max(matches, key=len)]
        # The turn number is how many replies this conversation already has after the task prompt.
        first = next(i for i, m in enumerate(messages) if max(matches, key=len) in str(m.get("content") or ""))
        turn = sum(1 for m in messages[first:] if m.get("role") == "assistant")
        tool, arguments, react = steps[min(turn, len(steps) - 1)]
        if body.get("tools"):
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{turn}", "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(arguments)}}]}
        return {"role": "assistant", "content": react}

    return respond
