"""The MCP server: an env's tools behind the official MCP SDK (``pip install "agentunit-gym[mcp]"``).

One episode per MCP session (:class:`~agentunit_gym.serve.served_episodes.EpisodePool`):

- **tools**: the env's own tool table (``AgentEnv.tools``), each with its JSON schema (under
  ``--protocol agentbench-fc``, AgentBench FC's names for them); a call
  is the env's JSON tool-call action, its result the observation. An invalid call is a tool
  error result carrying the env's feedback, and the session goes on where the env goes on.
  The call that ends the episode (a committing tool, the step limit) carries the score in
  its structured content; later calls get an error result.
- **the task**: the resource ``agentunit://task`` and the prompt ``task`` (the same text:
  the env's reset prompt); the server's ``instructions`` say so.
- **sessions**: over stdio the process serves one client, so one episode. Over streamable
  HTTP an episode belongs to an MCP session (``Mcp-Session-Id``, the initialize handshake):
  ``server/discover`` advertises the handshake versions only, so a 2026-era client in
  ``auto`` mode falls back to a session; a request that carries none is refused with the
  fix. A session's episode ends when the client deletes the session, when it is idle past
  the limit, or when the server stops.
- **HTTP security**: loopback by default; another host needs a bearer token
  (:class:`RequireBearerToken`, 401 without it). The SDK's DNS-rebinding protection stays on
  for loopback hosts.

Written against the SDK's low-level ``Server`` API as it is in mcp 2.0 through the newest 2.x.
"""

from __future__ import annotations

import hmac
import importlib.metadata
import ipaddress
import json
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agentunit_gym.core.actions import ToolSpec
from agentunit_gym.errors import AgentUnitError, ConfigError, DependencyVersionError, MissingDependencyError
from agentunit_gym.serve.served_episodes import AGENT_LABEL, EpisodePool, ServedEpisode, ServedTool, ToolOutcome

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server

Transport = Literal["stdio", "http"]

TASK_URI = "agentunit://task"
"""The resource holding the session's task (its env's reset prompt)."""

TASK_PROMPT = "task"
"""The prompt holding the same text as one user message."""

MCP_PATH = "/mcp"
"""Where the streamable HTTP endpoint is mounted."""

STDIO_SESSION = "stdio"
"""The session key of the one client a stdio server has."""

TOKEN_ENV = "AGENTUNIT_MCP_TOKEN"
"""The environment variable the bearer token is read from by default."""

SESSION_HEADER = "mcp-session-id"

_PURPOSE = "the MCP server (agentunit-gym mcp)"


def _require_mcp(version_of: Callable[[str], str] = importlib.metadata.version) -> None:
    """Raise unless mcp 2 is installed: mcp 1 (which ``openenv`` 0.4.2 on brings through
    ``fastmcp<4``) imports, but has another API, and the server would fail on its first import."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("mcp", "mcp", _PURPOSE) from exc
    try:
        version = version_of("mcp")
    except importlib.metadata.PackageNotFoundError:
        return  # an mcp without metadata (a source checkout): its imports will tell
    if int(version.split(".", 1)[0]) < 2:
        raise DependencyVersionError(
            "mcp", "mcp", _PURPOSE, found=f"mcp {version}", works_with="mcp 2.0.x",
            advice=("if the openenv package (0.4.2 or later) is installed, it holds mcp below 2 through "
                    "fastmcp<4: pip uninstall -y openenv openenv-core && pip install \"agentunit-gym[serve,mcp]\" "
                    "puts the env server on openenv-core, which takes mcp 2 (docs/serving.md, \"OpenEnv's two "
                    "packages\")."))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a bearer token.

    Raises:
        ConfigError: a non-loopback host and no token.
    """
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"--host {host} would expose the env's tools beyond this machine, and no bearer token is set: "
            f"put one in ${TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), or bind 127.0.0.1.")


def mcp_tool_fields(spec: ToolSpec | ServedTool) -> dict[str, Any]:
    """A tool as the fields of an MCP ``Tool``: name, description, input schema (from the tool
    table, or a protocol's names for the tools: :func:`~agentunit_gym.serve.served_episodes.served_tools`)."""
    tool = spec if isinstance(spec, ServedTool) else ServedTool.of(spec)
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def instructions_for(env_id: str, tools: Sequence[ToolSpec | ServedTool]) -> str:
    """The server's ``instructions``: where the task is and how an episode ends."""
    ending = ", ".join(t.name for t in tools if t.commits) or "the last step"
    return (f"Each MCP session plays one episode of the {env_id} environment. Read the task from the resource "
            f"{TASK_URI} (or the prompt '{TASK_PROMPT}'), act with the tools, and finish with {ending}: the "
            "result of the call that ends the episode carries its score (structured content: finish_reason, "
            "reward, success, score). The session then takes no more tool calls.")


class McpEpisodeServer:
    """Builds the SDK ``Server`` over an :class:`EpisodePool` and serves it over stdio or HTTP.

    Example (not run: it serves until interrupted)::

        pool = EpisodePool(EpisodeSettings("DB-v0", backend="sqlite"))
        McpEpisodeServer(pool, transport="http").serve_http("127.0.0.1", 8765)

    Args:
        pool: the episodes (closed by :meth:`serve_stdio` / :meth:`serve_http` when they return).
        transport: ``stdio`` (one session: the process) or ``http`` (MCP sessions).
    """

    def __init__(self, pool: EpisodePool, *, transport: Transport) -> None:
        _require_mcp()
        self.pool = pool
        self.transport = transport
        self.server = self._build()

    # ------------------------------------------------------------------ build

    def _build(self) -> Server[Any]:
        import mcp_types as types
        from mcp.server.lowlevel.server import Server

        from agentunit_gym.version import __version__

        server: Server[Any] = Server(
            "agentunit-gym", version=__version__, title=f"agentunit-gym {self.pool.env_id}",
            instructions=instructions_for(self.pool.env_id, self.pool.tools),
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
        )
        if self.transport == "http":
            server.add_request_handler("server/discover", types.RequestParams, self._discover_handshake_only)
        return server

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import mcp_types as types

        return types.ListToolsResult(tools=[types.Tool(**mcp_tool_fields(t)) for t in self.pool.tools])

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import anyio.to_thread
        import mcp_types as types

        try:
            episode = await self._episode(ctx)
            outcome = await anyio.to_thread.run_sync(episode.call, params.name, params.arguments)
        except AgentUnitError as exc:
            outcome = ToolOutcome(f"The server could not run this call: {exc}", is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=outcome.text)],
                                    structured_content=outcome.result, is_error=outcome.is_error)

    async def _list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import mcp_types as types

        return types.ListResourcesResult(resources=[types.Resource(
            uri=TASK_URI, name="task", title="The task of this session's episode", mime_type="text/plain",
            description=f"What the agent is asked to do in this {self.pool.env_id} episode (the env's prompt).")])

    async def _read_resource(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        if str(params.uri) != TASK_URI:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"no resource {params.uri!s}: this server has one, {TASK_URI}.")
        episode = await self._episode_or_error(ctx)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=TASK_URI, mime_type="text/plain", text=episode.prompt)])

    async def _list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import mcp_types as types

        return types.ListPromptsResult(prompts=[types.Prompt(
            name=TASK_PROMPT, title="Task", description=f"The task of this session's {self.pool.env_id} episode.")])

    async def _get_prompt(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        if params.name != TASK_PROMPT:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"no prompt {params.name!r}: this server has one, {TASK_PROMPT!r}.")
        episode = await self._episode_or_error(ctx)
        return types.GetPromptResult(
            description=f"task {episode.task_id} of {self.pool.env_id}",
            messages=[types.PromptMessage(role="user", content=types.TextContent(text=episode.prompt))])

    async def _discover_handshake_only(self, ctx: ServerRequestContext[Any], params: Any) -> Any:
        # Episodes live in MCP sessions, which only the handshake era has: advertising its
        # versions makes a client in auto mode fall back to the initialize handshake.
        import mcp_types as types
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        return types.DiscoverResult(supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
                                    capabilities=self.server.get_capabilities(),
                                    instructions=self.server.instructions)

    # --------------------------------------------------------------- sessions

    def session_key(self, ctx: ServerRequestContext[Any]) -> str:
        """The session a request belongs to (stdio: the process; HTTP: its ``Mcp-Session-Id``).

        Raises:
            MCPError: an HTTP request without a session.
        """
        if self.transport == "stdio":
            return STDIO_SESSION
        request = ctx.request
        headers = getattr(request, "headers", None)
        session_id = headers.get(SESSION_HEADER) if headers is not None else None
        if not session_id:
            import mcp_types as types
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_REQUEST, message=(
                "this server plays one episode per MCP session, and this request belongs to none: connect with "
                "the initialize handshake (protocol 2025-11-25; the Python SDK's Client(url, mode='legacy'), "
                "or mode='auto', which falls back to it here)."))
        return str(session_id)

    async def _episode(self, ctx: ServerRequestContext[Any]) -> ServedEpisode:
        import anyio.to_thread

        key = self.session_key(ctx)
        return await anyio.to_thread.run_sync(lambda: self.pool.get(key, agent=_agent_label(ctx)))

    async def _episode_or_error(self, ctx: ServerRequestContext[Any]) -> ServedEpisode:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        try:
            return await self._episode(ctx)
        except AgentUnitError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from exc

    # ---------------------------------------------------------------- serving

    def serve_stdio(self) -> None:
        """Serve one client over stdin/stdout until it closes them; then record and close its episode."""
        import anyio
        from mcp.server.stdio import stdio_server

        async def run() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

        def stop(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        # The client stops a server that outlives its pipe with SIGTERM (then SIGKILL): served, a
        # SIGTERM ends the serving like a closed pipe; while the episode is recorded and the run's
        # summary written it waits (SIGKILL stays the client's bound).
        # Signal handlers belong to the main thread: served from another one, the default stays.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, stop) if main else None
        try:
            anyio.run(run)
            if main:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self.pool.release(STDIO_SESSION, forget=True)  # the client closed the pipe: its session is over
        finally:
            if main:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.pool.close()
            finally:
                if main:
                    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    def http_app(self, host: str, token: str | None) -> Any:
        """The ASGI app: the SDK's streamable HTTP app at :data:`MCP_PATH`, behind the bearer
        check (when there is a token) and the hook that ends a deleted session's episode."""
        app: Any = self.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
        app = ReleaseDeletedSessions(app, self.pool)
        app = CloseOnShutdown(app, self.pool)
        if token:
            app = RequireBearerToken(app, token)
        return app

    def serve_http(self, host: str = "127.0.0.1", port: int = 8765, *, token: str | None = None,
                   ready: Callable[[str], None] | None = None) -> None:
        """Serve over streamable HTTP until interrupted; then record and close the open episodes.

        Args:
            host, port: where to listen (port 0: a free port, named in the URL given to ``ready``).
            token: the bearer token clients must send; required off loopback.
            ready: called with the endpoint URL once the socket listens (requests queue until the
                app has started, then are served).

        Raises:
            ConfigError: a non-loopback host without a token, or an address that cannot be bound.
        """
        import uvicorn

        check_binding(host, token)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)  # connections queue from now on: `ready` means clients can connect
        except OSError as exc:
            sock.close()
            self.pool.close()
            raise ConfigError(f"cannot listen on {host}:{port} ({exc}): pick another --port or --host.") from exc
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        server = uvicorn.Server(uvicorn.Config(self.http_app(host, token), log_level="warning", lifespan="on"))
        if ready is not None:
            ready(f"http://{shown}:{bound}{MCP_PATH}")
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
            self.pool.close()


def _agent_label(ctx: ServerRequestContext[Any]) -> str:
    """``mcp:<client name>`` when the client named itself in the handshake, else ``mcp``."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return f"{AGENT_LABEL}:{name}" if name else AGENT_LABEL


# ------------------------------------------------------------------ ASGI middleware

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequireBearerToken:
    """ASGI middleware: HTTP requests must carry ``Authorization: Bearer <token>``; others get 401.

    Example (with the token from ``$AGENTUNIT_MCP_TOKEN`` in the server; here, a tiny app behind it):

        >>> from starlette.responses import PlainTextResponse
        >>> from starlette.testclient import TestClient
        >>> client = TestClient(RequireBearerToken(PlainTextResponse("hi"), token="s3cret"))
        >>> client.get("/").status_code, client.get("/", headers={"Authorization": "Bearer s3cret"}).text
        (401, 'hi')
    """

    def __init__(self, app: App, token: str) -> None:
        if not token:
            raise ConfigError("RequireBearerToken needs a non-empty token.")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                body = json.dumps({"error": "unauthorized", "error_description": (
                    "this MCP server needs 'Authorization: Bearer <token>' with the token it was started with "
                    f"(${TOKEN_ENV})")}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="agentunit-gym"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class CloseOnShutdown:
    """ASGI middleware: at the server's lifespan shutdown, record and close the open episodes.

    uvicorn re-raises the SIGTERM or SIGINT it stopped on once it has shut down, so code after
    ``server.run()`` never runs on a signal; the lifespan shutdown does.
    """

    def __init__(self, app: App, pool: EpisodePool) -> None:
        self.app = app
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def closing(message: dict[str, Any]) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                import anyio.to_thread

                await anyio.to_thread.run_sync(self.pool.close)
            await send(message)

        await self.app(scope, receive, closing)


class ReleaseDeletedSessions:
    """ASGI middleware: when the SDK accepts a ``DELETE`` of an MCP session, end that session's episode."""

    def __init__(self, app: App, pool: EpisodePool) -> None:
        self.app = app
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        status = 0

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watch)
        session = next((v for k, v in scope.get("headers", []) if k == SESSION_HEADER.encode()), b"")
        if session and 200 <= status < 300:
            import anyio.to_thread

            key = session.decode("latin-1")
            await anyio.to_thread.run_sync(lambda: self.pool.release(key, forget=True))


__all__ = ["MCP_PATH", "STDIO_SESSION", "TASK_PROMPT", "TASK_URI", "TOKEN_ENV", "CloseOnShutdown", "McpEpisodeServer",
           "ReleaseDeletedSessions", "RequireBearerToken", "check_binding", "instructions_for", "is_loopback",
           "mcp_tool_fields"]
