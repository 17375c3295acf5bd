"""The env server: any registered AgentUnit env behind OpenEnv's HTTP and WebSocket API.

OpenEnv's ``create_app`` does the routing (``/ws`` sessions, ``/reset``, ``/step``,
``/state``, ``/schema``, ``/health``, ``/metadata``) and its session manager (a cap on open
sessions, an idle reaper). This module adds what is ours:

- **One env copy per session** from a warm :class:`~agentunit_gym.serve.pool.EnvPool`,
  closed when the session ends, is reaped after ``idle_timeout_s``, or its client goes away.
- **Limits**: at most ``max_sessions`` sessions; one more is refused with HTTP 503 and the
  reason (a WebSocket handshake too). Requests and WebSocket messages over
  ``max_request_bytes`` get 413 (an ``error`` message on a WebSocket, which stays open); a
  reply over ``max_action_chars`` gets 422.
- **Security**: loopback by default; binding elsewhere needs a bearer token
  (``Authorization: Bearer <token>``), and a request without it, or with a wrong one, gets 401.
- ``/health`` and ``/metadata`` say which env runs: id, backend, task count, splits, sessions.

Example (on loopback, a port the system picks):

    >>> import json, urllib.request
    >>> import gymnasium as gym
    >>> from agentunit_gym.serve.server import ServeConfig, start_server
    >>> with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0)) as running:
    ...     health = json.load(urllib.request.urlopen(running.url + "/health", timeout=30))
    ...     with gym.make("AgentUnit/Remote-v0", url=running.url) as env:
    ...         obs, info = env.reset(seed=0, options={"task_id": "db-weather-03"})
    >>> health["status"], health["env_id"], health["backend"], info["task_id"]
    ('healthy', 'AgentUnit/DB-v0', 'sqlite', 'db-weather-03')
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from agentunit_gym.core.registry import domain_of_env, env_ids, full_env_id
from agentunit_gym.errors import (
    AgentUnitError,
    BackendTimeoutError,
    ConfigError,
    EpisodeStateError,
    MissingDependencyError,
    RemoteProtocolError,
    ServerBusyError,
    TaskNotFoundError,
)
from agentunit_gym.serve.guard import RETRY_AFTER_S, ASGIApp, Guard
from agentunit_gym.serve.openenv_api import load_server_api
from agentunit_gym.serve.pool import EnvPool
from agentunit_gym.wrappers.protocols import ProtocolName

logger = logging.getLogger("agentunit_gym")

TOKEN_ENV_VAR = "AGENTUNIT_GYM_TOKEN"
"""Where ``agentunit-gym serve`` and the remote env read a token when none is passed."""

START_TIMEOUT_S = 60.0
"""How long :func:`start_server` waits for the server to listen."""


class ServeConfig(BaseModel):
    """What ``agentunit-gym serve`` serves, and its limits."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str
    """The env id (``AgentUnit/DB-v0`` or ``DB-v0``)."""
    backend: str | None = None
    """The env's ``backend=`` option; None for the env's default."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Other keyword arguments for ``gym.make`` (``max_steps``, ``invalid_action`` ...)."""
    host: str = "127.0.0.1"
    """Address to bind. Anything but loopback needs ``token``."""
    port: int = Field(default=8000, ge=0, le=65535)
    """Port to bind; 0 takes a free one (the URL says which)."""
    max_sessions: int = Field(default=16, ge=1)
    """Most sessions open at once; one more waits up to ``queue_timeout_s`` for a free one, then gets 503."""
    queue_timeout_s: float = Field(default=5.0, ge=0, le=600)
    """How long a session request waits for a free session when ``max_sessions`` are open
    (a burst of rollout workers queues instead of failing at once); then 503 with ``Retry-After``.
    0 refuses at once."""
    token: str | None = None
    """Bearer token every request must carry; None accepts any request (loopback only)."""
    idle_timeout_s: float = Field(default=300.0, gt=0)
    """A session with no message for this long is closed and its env copy freed."""
    warm: int = Field(default=2, ge=0)
    """Env copies kept built ahead, so a new session does not wait for one."""
    max_action_chars: int = Field(default=262_144, ge=1)
    """Longest reply a step accepts (422 beyond)."""
    max_request_bytes: int = Field(default=1 << 20, ge=1024)
    """Largest HTTP body or WebSocket message (413 beyond)."""
    check_reset: bool = False
    """Reset the env copy built at start once before listening, so a backend that cannot run
    here (a sandbox that cannot isolate, a database that cannot start) stops the server at
    start instead of failing every session's first reset (the serve image sets it)."""
    protocol: ProtocolName | None = None
    """An evaluation protocol (``agentbench``, ``agentbench-fc``, ``agentunit``): each session then
    plays the evaluator's stack under it (:func:`~agentunit_gym.wrappers.stack.make_eval_env`
    with ``protocol=``, as ``agentunit-gym eval --protocol`` does); None serves the bare env
    (``gym.make``)."""
    agentbench_root: str | None = None
    """An AgentBench checkout whose prompts open each episode under ``protocol="agentbench"``."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(config: ServeConfig) -> None:
    """Refuse to serve beyond loopback without a token.

    Raises:
        ConfigError: a non-loopback host and no token, or an empty token.
    """
    if config.token is not None and not config.token.strip():
        raise ConfigError("the token is empty; pass a long random one (e.g. `openssl rand -hex 32`).")
    if not is_loopback(config.host) and config.token is None:
        raise ConfigError(
            f"binding to {config.host!r} lets other machines run commands in the env; that needs a token: "
            f"pass --token (or set {TOKEN_ENV_VAR}), or bind to 127.0.0.1.")


class EnvServer:
    """The server's state: the env factory, the pool, the OpenEnv app, and the guard in front.

    Args:
        config: what to serve.

    Raises:
        ConfigError: an unknown env id, an exposed host without a token, or an env option
            the env refuses (the first copy is built here, so a mistake shows at start).
        AgentUnitError: with ``check_reset``, what that copy's reset raised (an
            ``IsolationError`` from a sandbox that cannot isolate here ...).
        MissingDependencyError: OpenEnv is not installed (``openenv-core``, the serve extra's, or
            ``openenv``); a :class:`DependencyVersionError` when one is, but not a version whose
            server API we can use.
    """

    def __init__(self, config: ServeConfig) -> None:
        check_exposure(config)
        openenv = load_server_api()
        if openenv.clash is not None:
            logger.warning("agentunit-gym serve: %s", openenv.clash)
        from agentunit_gym.serve.session import ReplyAction, TextObservation

        env_id = full_env_id(config.env)
        if domain_of_env(env_id) is None:
            raise ConfigError(f"unknown env {config.env!r}; the envs are {', '.join(env_ids())}.")
        self.config = config
        self.env_id = env_id
        kwargs = dict(config.env_kwargs)
        if config.backend is not None:
            kwargs["backend"] = config.backend
        self._kwargs = kwargs
        self.description = self._describe()
        self.pool = EnvPool(self._make_env, limit=config.max_sessions, warm=config.warm,
                            wait_s=config.queue_timeout_s)
        self._open = 0
        self._opened = 0
        self._count_lock = threading.Lock()
        self.openenv = openenv.description
        app = openenv.create_app(
            self._new_session, ReplyAction, TextObservation, env_name=env_id.split("/", 1)[-1],
            concurrency_config=openenv.ConcurrencyConfig(max_concurrent_envs=config.max_sessions,
                                                         session_timeout=config.idle_timeout_s))
        self._install_routes(app)
        self._guard = Guard(app, token=config.token, max_request_bytes=config.max_request_bytes,
                            busy_reason=self.busy_reason, queue_timeout_s=config.queue_timeout_s,
                            opened=lambda: self._opened)
        self.app: ASGIApp = self._guard

    # ------------------------------------------------------------ sessions

    @property
    def open_sessions(self) -> int:
        """Sessions open now (WebSocket sessions, and HTTP requests while they run)."""
        return self._open

    def _make_env(self) -> gym.Env[str, str]:
        from agentunit_gym.wrappers.stack import make_protocol_env

        return make_protocol_env(self.env_id, self.config.protocol, agentbench_root=self.config.agentbench_root,
                                 **self._kwargs)

    def _new_session(self) -> Any:
        from agentunit_gym.serve.session import SessionEnv

        with self._count_lock:
            self._open += 1
            self._opened += 1
        return SessionEnv(self.pool, self.env_id, max_action_chars=self.config.max_action_chars,
                          on_close=self._session_closed)

    def _session_closed(self) -> None:
        with self._count_lock:
            self._open -= 1

    def busy_reason(self) -> str | None:
        """Why a new session would be refused now, None when it would be accepted."""
        if self._open >= self.config.max_sessions:
            return (f"the env server has {self._open} sessions open, its limit (--max-sessions "
                    f"{self.config.max_sessions}); close a session or retry later, or start the server "
                    "with a higher --max-sessions.")
        return None

    # ------------------------------------------------------------ describe

    def _describe(self) -> dict[str, Any]:
        """The env id, backend, step limit, task count and splits, from one env copy built now."""
        env = self._make_env()
        try:
            if self.config.check_reset:
                env.reset(seed=0)
            base = env.unwrapped
            tasks = list(getattr(base, "tasks", []))
            splits = collections.Counter(str(getattr(t, "split", None) or "unsplit") for t in tasks)
            return {
                "env_id": self.env_id,
                "backend": str(getattr(base, "backend_name", self.config.backend or "")),
                "domain": str(getattr(base, "domain", "")),
                "tasks": len(tasks),
                "splits": dict(sorted(splits.items())),
                "max_steps": getattr(base, "default_max_steps", None),
            }
        finally:
            env.close()

    def health(self) -> dict[str, Any]:
        return {"status": "healthy", **self.description,
                "sessions": {"open": self._open, "max": self.config.max_sessions, "warm": self.pool.idle,
                             "queued": self._guard.queued}}

    def metadata(self) -> dict[str, Any]:
        from agentunit_gym.version import __version__

        return {"name": self.env_id, "description": f"agentunit-gym {self.env_id} over OpenEnv's API",
                "version": __version__, **self.description,
                "limits": {"max_sessions": self.config.max_sessions, "idle_timeout_s": self.config.idle_timeout_s,
                           "max_action_chars": self.config.max_action_chars,
                           "max_request_bytes": self.config.max_request_bytes},
                "auth": "bearer" if self.config.token else "none", "openenv": self.openenv}

    def _install_routes(self, app: Any) -> None:
        """Our /health and /metadata in place of OpenEnv's, and status codes for our errors."""
        from fastapi import Request
        from fastapi.responses import JSONResponse

        from agentunit_gym.serve.session import SessionError

        ours = ("/health", "/metadata")
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in ours]
        app.add_api_route("/health", self.health, methods=["GET"], tags=["Health"],
                          summary="Health, with the env id, backend, tasks, splits and sessions")
        app.add_api_route("/metadata", self.metadata, methods=["GET"], tags=["Environment Info"],
                          summary="The served env: id, backend, tasks, splits, limits")

        async def session_error(_: Request, exc: Exception) -> JSONResponse:
            error = exc.error if isinstance(exc, SessionError) else exc
            status = status_of(error)
            headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
            return JSONResponse({"detail": str(exc), "error": type(error).__name__}, status_code=status,
                                headers=headers)

        app.add_exception_handler(SessionError, session_error)

    def close(self) -> None:
        self.pool.close()


def status_of(error: BaseException) -> int:
    """The HTTP status of an error raised in a session."""
    table: tuple[tuple[type[BaseException], int], ...] = (
        (ServerBusyError, 503), (EpisodeStateError, 409), (TaskNotFoundError, 404),
        (RemoteProtocolError, 422), (ConfigError, 422), (BackendTimeoutError, 504),
    )
    for kind, status in table:
        if isinstance(error, kind):
            return status
    return 500


class RunningServer:
    """A server running in a background thread of this process; a context manager.

    Attributes:
        url: ``http://host:port`` it listens on.
        server: the :class:`EnvServer`.
    """

    def __init__(self, server: EnvServer, uvicorn_server: Any, thread: threading.Thread, url: str) -> None:
        self.server = server
        self.url = url
        self._uvicorn = uvicorn_server
        self._thread = thread

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop listening, close open sessions and the pool. Idempotent."""
        self._uvicorn.should_exit = True
        self._thread.join(timeout_s)
        self.server.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def start_server(config: ServeConfig, *, log_level: str = "warning") -> RunningServer:
    """Start an env server in a background thread and return once it listens.

    Raises:
        ConfigError, MissingDependencyError: see :class:`EnvServer`.
        BackendTimeoutError: it did not listen within ``START_TIMEOUT_S``.
        AgentUnitError: it could not bind (the port is taken).
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError("uvicorn", "serve", "agentunit-gym serve") from exc
    server = EnvServer(config)
    server.pool.start()
    # A WebSocket frame may be larger than our limit, so the guard can answer it with a message.
    ws_max = max(64 << 20, 4 * config.max_request_bytes)
    uv = uvicorn.Server(uvicorn.Config(server.app, host=config.host, port=config.port, log_level=log_level,
                                       ws_max_size=ws_max, lifespan="on"))
    thread = threading.Thread(target=uv.run, name="agentunit-env-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not uv.started:
        if not thread.is_alive():
            server.close()
            raise AgentUnitError(f"the env server did not start on {config.host}:{config.port} (is the port taken?); "
                                 "pick another --port, or 0 for a free one.")
        if time.monotonic() > deadline:
            uv.should_exit = True
            server.close()
            raise BackendTimeoutError(f"the env server did not listen within {START_TIMEOUT_S:.0f} s.")
        thread.join(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    return RunningServer(server, uv, thread, f"http://{host}:{port}")


def serve(config: ServeConfig, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (Ctrl-C), then close every session and the pool."""
    running = start_server(config)
    if on_ready is not None:
        on_ready(running.url)
    try:
        while running._thread.is_alive():
            running._thread.join(0.5)
    finally:
        running.stop()
