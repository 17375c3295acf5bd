"""Shared helpers of the server tests: HTTP calls, polling with a deadline, oracle replies."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym

from agentunit_gym.core.reference import OutputReply
from tests.waiting import wait_until

T = TypeVar("T")


def http(method: str, url: str, body: bytes | None = None, token: str | None = None,
         timeout_s: float = 30.0) -> tuple[int, Any]:
    """``(status, parsed JSON body or text)`` of one request; 4xx and 5xx are returned, not raised."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", errors="replace")


def poll(check: Callable[[], T | None], deadline_s: float, what: str) -> T:
    """Call ``check`` until it returns something truthy, or fail after ``deadline_s``
    (:func:`tests.waiting.wait_until`, under the name the server tests use)."""
    return wait_until(check, deadline_s, what)


def oracle_replies(env: gym.Env[str, str]) -> list[str | OutputReply]:
    """The current task's reference solution as replies (the evaluator's rendering)."""
    base: Any = env.unwrapped
    return [base.render_action(step) for step in base.task.reference_solution]


def play(env: gym.Env[str, str], replies: list[str | OutputReply], seed: int,
         options: dict[str, Any] | None = None) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
    """Reset with ``seed`` and send ``replies`` until the episode ends; every step's tuple, reset first."""
    observation, info = env.reset(seed=seed, options=options)
    out: list[tuple[str, float, bool, bool, dict[str, Any]]] = [(observation, 0.0, False, False, info)]
    for reply in replies:
        text = reply.complete(observation) if isinstance(reply, OutputReply) else reply
        observation, reward, terminated, truncated, info = env.step(text)
        out.append((observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return out
