"""Waiting in tests on a condition with a deadline, never on a fixed sleep (STYLE: tests wait
on conditions): on a loaded machine a sleep is too short, on an idle one too long."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.01
"""How often the condition is checked: the interval of the wait, not a delay the test relies on."""


def wait_until(check: Callable[[], T], deadline_s: float, what: str) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    Args:
        check: the condition, read afresh each time.
        deadline_s: how long to wait at most; generous, since it only costs time on a failure.
        what: the condition in words, for the failure.

    Raises:
        AssertionError: ``check`` stayed falsy past the deadline.
    """
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(POLL_S)
