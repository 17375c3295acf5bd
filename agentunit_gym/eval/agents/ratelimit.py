"""One rate gate per model endpoint, shared by every episode of the process: at most
``max_rps`` requests a second, and a 429's ``Retry-After`` pauses every caller, not just
the one that got it.

Thread-safe and event-loop-agnostic (a lock and the monotonic clock; callers sleep with
``asyncio.sleep``), so agents awaited on the episode engine's loop and agents called from
threads (the engine's synchronous agents, a training loop's) share it alike.

Example:

    >>> import asyncio
    >>> gate = endpoint_gate("http://127.0.0.1:9/doctest/v1", max_rps=5.0)
    >>> gate is endpoint_gate("http://127.0.0.1:9/doctest/v1/")   # one gate per endpoint
    True
    >>> asyncio.run(gate.acquire())   # waits for a free slot and for any pause (the first is free)
    >>> round(gate.reserve(), 1)      # the next slot is 1 / max_rps later
    0.2
    >>> gate.pause(1.0)               # a 429's Retry-After: every caller waits it out
    >>> 0.9 < gate.paused_for() <= 1.0
    True
"""

from __future__ import annotations

import asyncio
import threading
import time

from agentunit_gym.errors import ConfigError


class RateGate:
    """Spaces requests ``1 / max_rps`` apart (no limit when ``max_rps`` is None) and holds them
    all during a pause.

    Args:
        max_rps: requests per second at most; None for no limit.

    Raises:
        ConfigError: ``max_rps`` not positive.
    """

    def __init__(self, max_rps: float | None = None) -> None:
        if max_rps is not None and max_rps <= 0:
            raise ConfigError(f"max_rps must be positive, got {max_rps!r}.")
        self._lock = threading.Lock()
        self._interval = 0.0
        self._next_free = 0.0
        self._paused_until = 0.0
        self.set_rate(max_rps)

    @property
    def max_rps(self) -> float | None:
        return 1.0 / self._interval if self._interval else None

    def set_rate(self, max_rps: float | None) -> None:
        """Change the limit (the last caller's setting wins: one endpoint, one limit)."""
        with self._lock:
            self._interval = 0.0 if max_rps is None else 1.0 / max_rps

    def reserve(self) -> float:
        """Take the next request slot; the seconds to wait before sending (0 when free now)."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_free, self._paused_until)
            self._next_free = start + self._interval
            return start - now

    def pause(self, seconds: float) -> None:
        """Hold every request for ``seconds`` from now (a 429's ``Retry-After``)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + max(0.0, seconds))

    def paused_for(self) -> float:
        """Seconds left of the current pause (0 when none)."""
        with self._lock:
            return max(0.0, self._paused_until - time.monotonic())

    async def acquire(self) -> None:
        """Wait for a request slot, and past any pause set while waiting."""
        wait = self.reserve()
        while wait > 0:
            await asyncio.sleep(wait)
            wait = self.paused_for()

    def wait(self) -> None:
        """:meth:`acquire` for synchronous callers (blocking): the same slot and pause rule."""
        wait = self.reserve()
        while wait > 0:
            time.sleep(wait)
            wait = self.paused_for()


_GATES: dict[str, RateGate] = {}
_GATES_LOCK = threading.Lock()


def endpoint_gate(base_url: str, max_rps: float | None = None) -> RateGate:
    """The process-wide gate of the endpoint at ``base_url`` (made on first use)."""
    key = base_url.rstrip("/")
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = RateGate(max_rps)
        elif max_rps is not None:
            gate.set_rate(max_rps)
        return gate


__all__ = ["RateGate", "endpoint_gate"]
