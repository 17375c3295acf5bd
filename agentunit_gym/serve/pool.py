"""A warm pool of env copies for the env server: one copy per session, never shared.

A session takes a fresh copy (``acquire``) and gives it back when it ends (``release``),
which closes it: its sandbox, database or container is freed, and no later session can see
what the last one left. A background thread keeps a few fresh copies ready, so a session's
first reset does not wait for an env to be built. At most ``limit`` copies are leased at once:
one more waits up to ``wait_s`` for a lease to end, then is refused with
:class:`~agentunit_gym.errors.ServerBusyError`.

Example:

    >>> import gymnasium as gym, agentunit_gym
    >>> pool = EnvPool(lambda: gym.make("AgentUnit/DB-v0", backend="sqlite"), limit=1, warm=1)
    >>> pool.start()
    >>> env = pool.acquire()
    >>> _ = env.reset(seed=0)
    >>> pool.leased
    1
    >>> pool.acquire()   # the limit: one copy at a time
    Traceback (most recent call last):
    ...
    agentunit_gym.errors.ServerBusyError: ...
    >>> pool.release(env)   # closes the copy
    >>> pool.leased
    0
    >>> pool.close()
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import gymnasium as gym

from agentunit_gym.errors import ConfigError, ServerBusyError

logger = logging.getLogger("agentunit_gym")

EnvFactory = Callable[[], gym.Env[str, str]]

_RETRY_S = 1.0
"""How long the refill thread waits after a failed build, and at most between checks."""


class EnvPool:
    """Leases fresh env copies, at most ``limit`` at once, keeping ``warm`` copies built ahead.

    Args:
        make: builds one env copy (``gym.make(...)`` with the server's options).
        limit: the most copies leased at once (the server's ``--max-sessions``).
        warm: how many fresh copies to keep ready (never more than ``limit`` minus the leased ones).
        wait_s: how long ``acquire`` waits for a free lease when ``limit`` are leased (0: refuse at once).

    Raises:
        ConfigError: ``limit`` below 1, ``warm`` or ``wait_s`` below 0.
    """

    def __init__(self, make: EnvFactory, *, limit: int, warm: int = 2, wait_s: float = 0.0) -> None:
        if wait_s < 0:
            raise ConfigError(f"the wait for a free session must be 0 or more seconds, got {wait_s}.")
        if limit < 1:
            raise ConfigError(f"the session limit must be at least 1, got {limit}.")
        if warm < 0:
            raise ConfigError(f"the warm pool size must be 0 or more, got {warm}.")
        self._make = make
        self.limit = limit
        self.warm = warm
        self.wait_s = wait_s
        self._idle: collections.deque[gym.Env[str, str]] = collections.deque()
        self._leased = 0
        self._building = 0
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def leased(self) -> int:
        """Copies in use by sessions now."""
        return self._leased

    @property
    def idle(self) -> int:
        """Fresh copies ready now."""
        return len(self._idle)

    def start(self) -> None:
        """Start the thread that keeps ``warm`` copies ready (idempotent)."""
        with self._cond:
            if self._thread is None and self.warm > 0 and not self._closed:
                self._thread = threading.Thread(target=self._refill, name="agentunit-env-pool", daemon=True)
                self._thread.start()

    def acquire(self) -> gym.Env[str, str]:
        """A fresh env copy for one session.

        Raises:
            ServerBusyError: ``limit`` copies were leased for all of ``wait_s``.
            AgentUnitError: building a copy failed (the backend's own error).
        """
        with self._cond:
            deadline = time.monotonic() + self.wait_s
            while not self._closed and self._leased >= self.limit and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            if self._closed:
                raise ServerBusyError("the env server is shutting down; connect to another server.")
            if self._leased >= self.limit:
                waited = f" (waited {self.wait_s:g} s for one to end)" if self.wait_s else ""
                raise ServerBusyError(
                    f"the env server has {self._leased} sessions open, its limit (--max-sessions {self.limit})"
                    f"{waited}; close a session or retry later, or start the server with a higher --max-sessions.")
            self._leased += 1
            env = self._idle.popleft() if self._idle else None
            self._cond.notify_all()
        if env is not None:
            return env
        try:
            return self._make()
        except BaseException:
            with self._cond:
                self._leased -= 1
                self._cond.notify_all()
            raise

    def release(self, env: gym.Env[str, str]) -> None:
        """End a lease: close the copy (frees its sandbox or database); the pool builds a new one."""
        try:
            env.close()
        finally:
            with self._cond:
                self._leased -= 1
                self._cond.notify_all()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the refill thread and close the idle copies (leased ones are closed by their sessions)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        with self._cond:
            idle = list(self._idle)
            self._idle.clear()
        for env in idle:
            env.close()

    def _wanted(self) -> int:
        return min(self.warm, self.limit - self._leased) - len(self._idle) - self._building

    def _refill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._wanted() <= 0:
                    self._cond.wait(_RETRY_S)
                if self._closed:
                    return
                self._building += 1
            env: gym.Env[str, str] | None = None
            try:
                env = self._make()
            except Exception as exc:  # noqa: BLE001 - a failed build is logged; acquire() builds and raises
                logger.warning("agentunit-gym serve: building a warm env copy failed: %s", exc)
            with self._cond:
                self._building -= 1
                if env is not None and not self._closed:
                    self._idle.append(env)
                    env = None
                elif env is None:
                    self._cond.wait(_RETRY_S)
            if env is not None:  # built while the pool was closing
                env.close()
