"""OpenEnv's client for an AgentUnit env server, sending the server's bearer token.

OpenEnv's ``GenericEnvClient`` (openenv-core 0.3) opens its WebSocket with no headers, so it
cannot reach a server that has a token, which every server listening beyond loopback has (the
serve image's always does). :class:`AgentUnitEnvClient` is that client with the token: from
``token=``, else ``$AGENTUNIT_GYM_TOKEN``. Its actions may be the agent's reply as a string.

:meth:`AgentUnitEnvClient.from_docker_image` starts the serve image with OpenEnv's own Docker
provider (``docker run -p <port>:8000 -e ...``, then its wait on ``GET /health``), passing the
token, env id and backend as the container's environment, and plays on it; ``close()`` stops
the container.

Example (a server with a token; ``agentunit-gym serve --token ...`` starts one from a shell):

    >>> from agentunit_gym.serve.openenv_client import AgentUnitEnvClient
    >>> from agentunit_gym.serve.server import ServeConfig, start_server
    >>> with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, token="s3cret", warm=0)) as running:
    ...     with AgentUnitEnvClient(base_url=running.url, token="s3cret").sync() as client:
    ...         first = client.reset(seed=0, options={"task_id": "db-weather-03"})
    ...         result = client.step("Action: Operation\\n```sql\\nSELECT MIN(temp_min) FROM seattle_weather\\n```")
    >>> result.observation["text"], result.reward, result.done
    ('[(-3.2,)]', 0.0, False)
"""

from __future__ import annotations

import inspect
import os
import secrets
from typing import Any

from agentunit_gym.errors import ConfigError, MissingDependencyError

TOKEN_ENV_VAR = "AGENTUNIT_GYM_TOKEN"
"""Read when no ``token`` is given; the serve image's server reads the same variable."""

IMAGE_ENV_VARS = ("AGENTUNIT_GYM_TOKEN", "AGENTUNIT_GYM_ENV", "AGENTUNIT_GYM_BACKEND")
"""The serve image's settings, passed as the container's environment (all OpenEnv's provider passes)."""

READY_TIMEOUT_S = 180.0
"""How long :meth:`AgentUnitEnvClient.from_docker_image` waits for the container's ``/health``
(the server imports Gradio and builds one env copy before it listens; OpenEnv's default of 30 s
is short on a loaded machine)."""

try:
    from openenv.core.generic_client import GenericEnvClient
except ImportError as exc:  # pragma: no cover - the serve extra is what brings it
    raise MissingDependencyError("openenv-core", "serve", "OpenEnv's client (agentunit_gym.serve.openenv_client)") \
        from exc

_HEADERS_IN_INIT = "headers" in inspect.signature(GenericEnvClient.__init__).parameters
"""openenv 0.10's client takes ``headers=``; openenv-core 0.3's does not, and :meth:`connect` adds them."""


class AgentUnitEnvClient(GenericEnvClient):  # type: ignore[misc]  # OpenEnv's classes are untyped
    """OpenEnv's generic client with the server's bearer token (see the module docstring).

    Args:
        base_url: the server, as ``agentunit-gym serve`` prints it (``http://`` or ``ws://``).
        token: the server's token; default ``$AGENTUNIT_GYM_TOKEN``, else none (a loopback
            server without a token).
        **kwargs: OpenEnv's client options (``connect_timeout_s``, ``message_timeout_s``, ``provider`` ...).
    """

    def __init__(self, base_url: str, *, token: str | None = None, **kwargs: Any) -> None:
        token = token if token is not None else os.environ.get(TOKEN_ENV_VAR) or None
        self._auth_headers = {"Authorization": f"Bearer {token}"} if token else {}
        if _HEADERS_IN_INIT:
            kwargs["headers"] = {**self._auth_headers, **(kwargs.get("headers") or {})}
        super().__init__(base_url, **kwargs)

    async def connect(self) -> AgentUnitEnvClient:
        """Open the session's WebSocket, with the token (openenv-core 0.3 sends no headers).

        Raises:
            ConnectionError: the server cannot be reached, or refused the handshake (a 401
                without the right token; a 503 when full), as OpenEnv's client raises it.
        """
        if _HEADERS_IN_INIT or self._ws is not None:  # type: ignore[has-type]  # OpenEnv's attribute
            await super().connect()
            return self
        from websockets.asyncio.client import connect as ws_connect

        try:
            self._ws = await ws_connect(self._ws_url, open_timeout=self._connect_timeout,
                                        max_size=self._max_message_size,
                                        additional_headers=self._auth_headers or None, proxy=None)
        except Exception as exc:  # OpenEnv's client raises ConnectionError for every failure here
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self

    def _step_payload(self, action: Any) -> dict[str, Any]:
        """The step message's data: the reply text as ``{"text": ...}`` (a dict passes as it is)."""
        if isinstance(action, str):
            return {"text": action}
        payload: dict[str, Any] = super()._step_payload(action)
        return payload

    @classmethod
    async def from_docker_image(cls, image: str | None = None, provider: Any | None = None, *,
                                token: str | None = None, env: str | None = None, backend: str | None = None,
                                env_vars: dict[str, str] | None = None, port: int | None = None,
                                ready_timeout_s: float = READY_TIMEOUT_S, **kwargs: Any) -> AgentUnitEnvClient:
        """Start the serve image with OpenEnv's Docker provider and connect a session to it.

        Args:
            image: the image; default the serve image, built when missing or stale
                (``agentunit-gym images build serve``).
            provider: an OpenEnv container provider; default OpenEnv's ``LocalDockerProvider``.
            token: the server's token; default ``$AGENTUNIT_GYM_TOKEN``, else a new random one
                (the server in the container always needs one: it listens beyond loopback).
            env: the env id the container serves (default: the image's own, ``AGENTUNIT_GYM_ENV`` in
                its Dockerfile).
            backend: its backend (default: the env's own default, embedded).
            env_vars: more environment for the container.
            port: the host port (default: a free one, OpenEnv's provider picks it).
            ready_timeout_s: how long to wait for ``GET /health``.
            **kwargs: OpenEnv's client options.

        Returns:
            A connected client; ``await client.close()`` ends the session and stops the container.

        Raises:
            ConfigError: ``env_vars`` sets one of the image's own settings (use the arguments).
            TimeoutError: the server did not answer ``/health`` in time (``docker logs`` on the
                container says why; it is left running for that).
            ConnectionError: the session's handshake failed.
        """
        clash = sorted(set(env_vars or {}) & set(IMAGE_ENV_VARS))
        if clash:
            raise ConfigError(f"env_vars sets {', '.join(clash)}: pass token=, env= and backend= instead.")
        if image is None:
            from agentunit_gym.backends.images import ensure_image

            image = ensure_image("serve")
        if provider is None:
            from openenv.core.containers.runtime import LocalDockerProvider

            provider = LocalDockerProvider()
        token = token or os.environ.get(TOKEN_ENV_VAR) or secrets.token_urlsafe(24)
        settings = {**(env_vars or {}), "AGENTUNIT_GYM_TOKEN": token}
        if env is not None:
            settings["AGENTUNIT_GYM_ENV"] = env
        if backend is not None:
            settings["AGENTUNIT_GYM_BACKEND"] = backend
        base_url = provider.start_container(image, port=port, env_vars=settings)
        provider.wait_for_ready(base_url, timeout_s=ready_timeout_s)
        client = cls(base_url, token=token, provider=provider, **kwargs)
        try:
            await client.connect()
        except BaseException:
            await client.close()
            raise
        return client
