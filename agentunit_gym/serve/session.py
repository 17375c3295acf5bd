"""One server session as an OpenEnv ``Environment``: the wire models and the adapter.

OpenEnv's server (``create_app``, from :mod:`~agentunit_gym.serve.openenv_api`) makes one ``Environment`` per
WebSocket session through a factory and calls its ``reset``, ``step``, ``state`` and
``close``. :class:`SessionEnv` is that object for an AgentUnit env: it leases a fresh env
copy from the server's :class:`~agentunit_gym.serve.pool.EnvPool` at its first reset and
gives it back (closed) when the session ends, is reaped, or its client goes away.

On the wire (OpenEnv's WebSocket messages, ``{"type": ..., "data": ...}``):

- reset: ``{"type": "reset", "data": {"seed": 0, "options": {"task_id": "db-001"}}}``
- step: ``{"type": "step", "data": {"text": "<the agent's reply>"}}`` (:class:`ReplyAction`)
- the answer to both: ``{"type": "observation", "data": {"observation": {"text", "info",
  "terminated", "truncated"}, "reward", "done"}}`` (:class:`TextObservation`; ``info`` is the
  env's info made JSON-safe by :func:`~agentunit_gym.serve.jsonsafe.to_jsonable`).
- an error: ``{"type": "error", "data": {"message": "EpisodeStateError: ...", "code": ...}}``;
  the message starts with the AgentUnit error's class name, so the client raises the same type.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
from pydantic import Field

from agentunit_gym.errors import AgentUnitError, EpisodeStateError, RemoteProtocolError
from agentunit_gym.serve.jsonsafe import to_jsonable
from agentunit_gym.serve.openenv_api import load_server_api
from agentunit_gym.serve.pool import EnvPool

# The wire models derive from OpenEnv's, so importing this module needs OpenEnv (openenv-core or
# openenv); without it the import raises MissingDependencyError, an ImportError with the pip line.
# mypy reads OpenEnv's own names (untyped: Any); at run time they come through the one seam.
if TYPE_CHECKING:
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
else:
    _OPENENV = load_server_api()
    Action, Observation, State = _OPENENV.Action, _OPENENV.Observation, _OPENENV.State
    Environment, EnvironmentMetadata = _OPENENV.Environment, _OPENENV.EnvironmentMetadata

RESET_FIELDS = ("seed", "episode_id", "options")
"""What a reset message's ``data`` may hold."""

STEP_FIELDS = frozenset({"request_id"})
"""Fields of OpenEnv's HTTP step request besides the action and ``timeout_s`` (which the
session ignores: the env's own per-action timeouts apply)."""


class ReplyAction(Action):  # type: ignore[misc]  # openenv ships no type information
    """One step: the agent's raw reply, as the env's ``step(text)`` takes it."""

    text: str = Field(description="The agent's reply: ReAct text in the domain's grammar, or a JSON tool call.")


class TextObservation(Observation):  # type: ignore[misc]
    """What ``reset`` and ``step`` return: the env's observation text and its ``info``."""

    text: str = Field(description="The observation the agent reads.")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info, JSON-safe.")
    terminated: bool = Field(default=False, description="The episode ended by the agent's action or the policy.")
    truncated: bool = Field(default=False, description="The episode ended by a limit.")


class SessionState(State):  # type: ignore[misc]
    """The session's state for OpenEnv's ``state`` message and ``/state``."""

    env_id: str = Field(description="The env this server serves.")
    task_id: str | None = Field(default=None, description="The running episode's task, None before a reset.")
    finish_reason: str | None = Field(default=None, description="Why the episode ended, None while it runs.")


class SessionError(Exception):
    """An :class:`AgentUnitError` raised in a session, relayed to the client.

    Its text is ``"<ErrorClass>: <message>"`` (OpenEnv sends ``str(error)``), from which the
    remote env raises the same class."""

    def __init__(self, error: AgentUnitError) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


class SessionEnv(Environment[ReplyAction, TextObservation, SessionState]):  # type: ignore[misc]
    """An OpenEnv ``Environment`` over one leased AgentUnit env copy.

    Args:
        pool: where the env copy comes from and goes back to.
        env_id: the served env id (for state and metadata).
        max_action_chars: longest reply accepted; longer ones raise :class:`RemoteProtocolError`.
        on_close: called once when the session ends (the server counts open sessions).
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    def __init__(self, pool: EnvPool, env_id: str, *, max_action_chars: int,
                 on_close: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._pool = pool
        self._env_id = env_id
        self._max_action_chars = max_action_chars
        self._on_close = on_close
        self._env: gym.Env[str, str] | None = None
        self._episode_id: str | None = None
        self._steps = 0
        self._task_id: str | None = None
        self._finish: str | None = None
        self._closed = False
        self._lock = threading.Lock()

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              options: dict[str, Any] | None = None, **kwargs: Any) -> TextObservation:
        """Start an episode on this session's env copy (leased at the first reset)."""
        try:
            if kwargs:
                raise RemoteProtocolError(
                    f"unknown reset field(s) {sorted(kwargs)}: a reset takes {', '.join(RESET_FIELDS)}.")
            if options is not None and not isinstance(options, dict):
                raise RemoteProtocolError(f"reset options must be an object, got {type(options).__name__}.")
            env = self._lease()
            observation, info = env.reset(seed=seed, options=options)
        except AgentUnitError as exc:
            raise SessionError(exc) from exc
        self._episode_id = episode_id or uuid.uuid4().hex
        self._steps = 0
        self._task_id = str(info.get("task_id")) if info.get("task_id") is not None else None
        self._finish = None
        return TextObservation(text=observation, info=to_jsonable(info), reward=0.0, done=False)

    def step(self, action: ReplyAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        """Send the reply to the env copy; the answer carries the observation, reward and info."""
        try:
            unknown = sorted(set(kwargs) - STEP_FIELDS)
            if unknown:
                raise RemoteProtocolError(f"unknown step field(s) {unknown}: a step takes action, timeout_s and "
                                          "request_id.")
            if len(action.text) > self._max_action_chars:
                raise RemoteProtocolError(
                    f"the reply has {len(action.text)} characters, over this server's limit of "
                    f"{self._max_action_chars}; send a shorter reply (or start the server with a higher "
                    "--max-action-chars).")
            if self._closed:
                raise EpisodeStateError(self._closed_message)
            if self._env is None:
                raise EpisodeStateError("step before reset: send a reset message first.")
            observation, reward, terminated, truncated, info = self._env.step(action.text)
        except AgentUnitError as exc:
            raise SessionError(exc) from exc
        self._steps += 1
        finish = info.get("finish_reason")
        self._finish = None if finish is None else str(to_jsonable(finish))
        return TextObservation(text=observation, info=to_jsonable(info), reward=float(reward),
                               done=bool(terminated or truncated), terminated=bool(terminated),
                               truncated=bool(truncated))

    @property
    def state(self) -> SessionState:
        return SessionState(episode_id=self._episode_id, step_count=self._steps, env_id=self._env_id,
                            task_id=self._task_id, finish_reason=self._finish)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=self._env_id, description=f"agentunit-gym {self._env_id}")

    def close(self) -> None:
        """End the session: the env copy is closed and its lease returned. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            env, self._env = self._env, None
        try:
            if env is not None:
                self._pool.release(env)
        finally:
            if self._on_close is not None:
                self._on_close()

    _closed_message = ("this session was closed (idle past the server's --idle-timeout, or the server shut "
                       "down): open a new session.")

    def _lease(self) -> gym.Env[str, str]:
        with self._lock:
            if self._closed:
                raise EpisodeStateError(self._closed_message)
            if self._env is None:
                self._env = self._pool.acquire()
            return self._env
