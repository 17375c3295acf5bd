"""``AgentUnit/Remote-v0``: a gymnasium env that plays one session on an env server.

The server (``agentunit-gym serve``) runs the real env; this env holds one WebSocket
session on it and turns ``reset``/``step`` into OpenEnv's messages. Observations, rewards,
``terminated``/``truncated`` and ``info`` are the served env's: ``info`` arrives as JSON, and
the keys the core gives a type are typed again (``finish_reason`` a
:class:`~agentunit_gym.core.finish.FinishReason`, ``timing`` a ``StepTiming``); the others
stay as JSON values (an enum as its value, a tuple as a list).

Example (against a server started here; ``agentunit-gym serve`` starts one from a shell):

    >>> import gymnasium as gym
    >>> import agentunit_gym
    >>> from agentunit_gym.serve.server import ServeConfig, start_server
    >>> with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0)) as running:
    ...     with gym.make("AgentUnit/Remote-v0", url=running.url) as env:
    ...         obs, info = env.reset(seed=0, options={"task_id": "db-weather-03"})
    ...         obs, reward, terminated, truncated, info = env.step(
    ...             "Action: Operation\\n```sql\\nSELECT MIN(temp_min) FROM seattle_weather\\n```")
    >>> obs, reward, terminated, type(info["timing"]).__name__   # info typed again, as the env's
    ('[(-3.2,)]', 0.0, False, 'StepTiming')

Every request has a deadline (``timeout_s``; ``connect_timeout_s`` for the handshake). A
server that cannot be reached raises :class:`~agentunit_gym.errors.BackendUnavailableError`
with the URL; one that refuses the session says why (a wrong token, no free session).
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym

from agentunit_gym import errors
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.info import StepTiming
from agentunit_gym.core.spaces import UnicodeText
from agentunit_gym.errors import (
    AgentUnitError,
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
    EpisodeStateError,
    MissingDependencyError,
    RemoteProtocolError,
)

TOKEN_ENV_VAR = "AGENTUNIT_GYM_TOKEN"
"""Read when no ``token`` is given (the server's ``--token`` falls back to the same variable)."""

_RELAYED: dict[str, type[AgentUnitError]] = {
    cls.__name__: cls for cls in (
        errors.ConfigError, errors.TaskNotFoundError, errors.EpisodeStateError, errors.BackendUnavailableError,
        errors.BackendError, errors.BackendTimeoutError, errors.IsolationError, errors.ServerBusyError,
        errors.RemoteProtocolError,
    )
}
"""Errors a server relays by name (``"EpisodeStateError: ..."``) that the client raises as the same class."""


def websocket_url(url: str) -> str:
    """``http://h:p`` (or ``ws://h:p``, with or without ``/ws``) -> ``ws://h:p/ws``.

    Raises:
        ConfigError: not an http(s) or ws(s) URL.
    """
    base = url.strip().rstrip("/")
    for old, new in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(old):
            base = new + base[len(old):]
    if not base.startswith(("ws://", "wss://")):
        raise ConfigError(f"the server URL must start with http://, https://, ws:// or wss://, got {url!r}.")
    return base if base.endswith("/ws") else base + "/ws"


_FINISH_VALUES = frozenset(r.value for r in FinishReason)


def restore_info(info: dict[str, Any]) -> dict[str, Any]:
    """Give the JSON ``info`` back the core's types where it has them (``finish_reason``, ``timing``)."""
    restored = dict(info)
    reason = restored.get("finish_reason")
    if isinstance(reason, str) and reason in _FINISH_VALUES:  # any other value (a placeholder) stays as sent
        restored["finish_reason"] = FinishReason(reason)
    timing = restored.get("timing")
    if isinstance(timing, dict) and isinstance(timing.get("env_s"), (int, float)):
        restored["timing"] = StepTiming(float(timing["env_s"]))
    return restored


def relayed_error(message: str) -> AgentUnitError:
    """The error a server's ``"<ErrorClass>: <message>"`` names, as that class (else a BackendError)."""
    name, sep, rest = message.partition(": ")
    cls = _RELAYED.get(name)
    if sep and cls is not None:
        return cls(rest)
    return BackendError(f"the env server failed: {message}")


class RemoteEnv(gym.Env[str, str]):
    """Plays one session of a served env (``gym.make("AgentUnit/Remote-v0", url=..., token=...)``).

    Args:
        url: the server, ``http://host:port`` as ``agentunit-gym serve`` prints it.
        token: the server's bearer token; None reads ``AGENTUNIT_GYM_TOKEN``, else sends none.
        timeout_s: deadline of each reset or step answer.
        connect_timeout_s: deadline of the WebSocket handshake.
        render_mode: None or ``"ansi"`` (the last observation).

    Raises:
        ConfigError: no URL, or not an http(s)/ws(s) one.
        BackendUnavailableError: the server cannot be reached, or refuses the token (401);
            the message says which and what to do.
        ServerBusyError: the server has no free session (503).
        MissingDependencyError: ``websockets`` is not installed.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout_s: float = 120.0,
                 connect_timeout_s: float = 10.0, render_mode: str | None = None) -> None:
        if not url:
            raise ConfigError('AgentUnit/Remote-v0 needs the server\'s URL: gym.make("AgentUnit/Remote-v0", '
                              'url="http://127.0.0.1:8000"), as `agentunit-gym serve` prints it.')
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ConfigError(f"timeouts must be positive, got timeout_s={timeout_s}, "
                              f"connect_timeout_s={connect_timeout_s}.")
        self.url = url
        self.render_mode = render_mode
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self._ws_url = websocket_url(url)
        self._timeout_s = timeout_s
        self._token = token if token is not None else os.environ.get(TOKEN_ENV_VAR) or None
        self._last_observation = ""
        self._closed = False
        self._connection: Any = None
        self._connection = self._connect(connect_timeout_s)

    def _connect(self, timeout_s: float) -> Any:
        try:
            from websockets.exceptions import InvalidStatus, WebSocketException
            from websockets.sync.client import connect
        except ImportError as exc:
            raise MissingDependencyError("websockets", "serve", "AgentUnit/Remote-v0") from exc
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        try:
            # Entered as a context manager: websockets 17 opens the connection there (and
            # warns when it is used without); 15 and 16 return the open connection from both.
            return connect(self._ws_url, additional_headers=headers, open_timeout=timeout_s, max_size=None,
                           close_timeout=5).__enter__()
        except InvalidStatus as exc:
            status = exc.response.status_code
            body = exc.response.body.decode("utf-8", errors="replace") if exc.response.body else ""
            try:
                detail = str(json.loads(body).get("detail", body))
            except (ValueError, AttributeError):
                detail = body
            if status == 401:
                raise BackendUnavailableError(
                    f"the env server at {self.url} refused the session (401): {detail} "
                    f"Pass token=... (or set {TOKEN_ENV_VAR}).") from exc
            if status == 503:
                raise errors.ServerBusyError(f"the env server at {self.url} has no free session (503): {detail}") \
                    from exc
            raise BackendUnavailableError(f"the env server at {self.url} refused the session (HTTP {status}): "
                                          f"{detail or 'no reason given'}") from exc
        except TimeoutError as exc:
            raise BackendUnavailableError(
                f"no answer from the env server at {self.url} within {timeout_s:.0f} s: check the URL and that "
                "`agentunit-gym serve` runs there.") from exc
        except (OSError, WebSocketException) as exc:
            raise BackendUnavailableError(
                f"cannot reach the env server at {self.url} ({type(exc).__name__}: {exc}): start one with "
                "`agentunit-gym serve --env ENV`, or check the URL.") from exc

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        if self._closed:
            raise EpisodeStateError(f"{message['type']}() after close(): make a new env.")
        try:
            self._connection.send(json.dumps(message))
            raw = self._connection.recv(timeout=self._timeout_s)
        except TimeoutError as exc:
            raise BackendTimeoutError(
                f"the env server at {self.url} did not answer a {message['type']} within {self._timeout_s:.0f} s; "
                "raise timeout_s, or check the server.") from exc
        except ConnectionClosed as exc:
            raise BackendError(
                f"the env server at {self.url} closed the session ({exc}); the session is lost: make a new env.") \
                from exc
        except OSError as exc:
            raise BackendUnavailableError(f"lost the env server at {self.url}: {exc}") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise RemoteProtocolError(f"the env server at {self.url} sent something that is not JSON: "
                                      f"{str(raw)[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise RemoteProtocolError(f"the env server at {self.url} sent {type(answer).__name__}, not an object.")
        if answer.get("type") == "error":
            data = answer.get("data") or {}
            detail = str(data.get("message", "no message"))
            if data.get("code") == "EXECUTION_ERROR":
                raise relayed_error(detail)
            if data.get("code") == "CAPACITY_REACHED":  # OpenEnv's own cap, after the handshake
                raise errors.ServerBusyError(f"the env server at {self.url} has no free session: {detail}")
            raise RemoteProtocolError(f"the env server at {self.url} refused the {message['type']} "
                                      f"({data.get('code')}): {detail}")
        data = answer.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("observation"), dict):
            raise RemoteProtocolError(f"the env server at {self.url} answered a {message['type']} without an "
                                      f"observation: {str(answer)[:200]}")
        return data

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server (``options`` as the served env takes them, JSON-safe)."""
        super().reset(seed=seed)
        payload: dict[str, Any] = {}
        if seed is not None:
            payload["seed"] = seed
        if options is not None:
            from agentunit_gym.serve.jsonsafe import to_jsonable

            payload["options"] = to_jsonable(options)
        data = self._call({"type": "reset", "data": payload})
        observation = data["observation"]
        self._last_observation = str(observation.get("text", ""))
        return self._last_observation, restore_info(observation.get("info") or {})

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send the reply; the server's env steps."""
        if not isinstance(action, str):
            raise ConfigError(f"the action must be text, got {type(action).__name__}.")
        data = self._call({"type": "step", "data": {"text": action}})
        observation = data["observation"]
        self._last_observation = str(observation.get("text", ""))
        reward = float(data.get("reward") or 0.0)
        return (self._last_observation, reward, bool(observation.get("terminated")),
                bool(observation.get("truncated")), restore_info(observation.get("info") or {}))

    def render(self) -> str | None:
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """End the session (the server frees its env copy). Idempotent."""
        if self._closed:
            return
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.send(json.dumps({"type": "close"}))
        except Exception:  # noqa: BLE001 - the server may be gone already; closing must not raise
            pass
        finally:
            connection.close()
