"""Connecting to a Ray cluster for ``eval --ray``: the address forms, a quick probe that a
``HOST:PORT`` answers as Ray does (so a wrong address fails within
:data:`~agentunit_gym.eval.run.deadlines.PROBE_TIMEOUT_S` instead of Ray's long wait), and
``ray.init``. The driver's loop is :mod:`agentunit_gym.eval.run.cluster`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from types import ModuleType
from typing import Any

from agentunit_gym.errors import BackendUnavailableError, ConfigError, MissingDependencyError
from agentunit_gym.eval.run.deadlines import PROBE_TIMEOUT_S

_KEYWORD = re.compile(r"local|auto")
"""The addresses that are words, not places: start Ray here, or join the cluster Ray finds."""

_ADDRESS = re.compile(r"^(ray://)?(?P<host>\[[0-9A-Fa-f:]+\]|[^:/\s]+):(?P<port>\d{1,5})$")


def import_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        MissingDependencyError: ray is not installed (the message names the ``ray`` extra).
    """
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError("ray", "ray", "eval --ray (episodes on a Ray cluster)") from exc
    return ray


def check_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; None for ``local`` and ``auto``.

    Raises:
        ConfigError: anything else.
    """
    if _KEYWORD.fullmatch(address):
        return None
    match = _ADDRESS.match(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ConfigError(f"--ray {address!r}: give local (start Ray in this process), auto (join the cluster "
                          "this machine belongs to), HOST:PORT (the head node's GCS port, 6379 by default) or "
                          "ray://HOST:PORT (Ray Client, port 10001 by default).")
    return match["host"].strip("[]"), int(match["port"])


def connect(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Connect this process to the Ray cluster at ``address`` (``local`` starts one here).

    Returns:
        True when this call connected; False when the process was connected to Ray already
        (that connection is used as it is, and left open at the end).

    Raises:
        ConfigError: a malformed address.
        MissingDependencyError: ray is not installed.
        BackendUnavailableError: nothing answers there as Ray does (a ``HOST:PORT`` that is
            not a gRPC server, checked within ``timeout_s``), or Ray cannot connect.
    """
    target = check_address(address)
    ray = import_ray()
    if ray.is_initialized():
        return False
    if target is not None:
        problem = _grpc_probe(target, timeout_s)
        if problem is not None:
            raise BackendUnavailableError(
                f"no Ray cluster answers at {address}: {problem}. Start one (`ray start --head`, docs/eval.md "
                "\"Running on a cluster\") or check the address and port.")
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False, "logging_level": logging.WARNING}
    if not address.startswith("ray://"):
        kwargs["include_dashboard"] = False
    # In this thread: Ray started from another thread loses its own processes (measured: the
    # GCS never answered), so no thread with a deadline here. The probe above makes a dead
    # address, or a port of something else, fail at once.
    try:
        ray.init(**kwargs)
    except Exception as exc:  # noqa: BLE001 - ray raises ConnectionError, RuntimeError, ValueError...
        hint = (" No Ray cluster runs on this machine (or RAY_ADDRESS is unset): start one with `ray start "
                "--head`, pass the head's address (`--ray HOST:PORT`), or `--ray local` to start Ray in this "
                "process." if address == "auto" else "")
        raise BackendUnavailableError(f"could not connect to the Ray cluster at {address}: "
                                      f"{type(exc).__name__}: {exc}{hint}") from exc
    return True


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""What a gRPC client sends first (the HTTP/2 connection preface, then an empty SETTINGS
frame); a gRPC server, as Ray's GCS and Ray Client server are, answers with a SETTINGS frame."""

_SETTINGS_FRAME = 4


def _grpc_probe(target: tuple[str, int], timeout_s: float) -> str | None:
    """Why ``target`` is not a gRPC server (nothing listening, no answer in time, another
    protocol), None when it answers as one. Ray itself waits a long time on a port that
    accepts connections but never speaks its protocol; this answers within ``timeout_s``.
    Skipped (None) when Ray is set to use TLS (``RAY_USE_TLS``)."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection(target, timeout=timeout_s) as conn:
            conn.sendall(_HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = conn.recv(9 - len(header))
                if not chunk:
                    return "the connection was closed without an answer (not a Ray GCS or Ray Client port?)"
                header += chunk
    except TimeoutError:
        return f"something accepts connections there but does not answer as Ray does within {timeout_s:g} s"
    except OSError as exc:
        return str(exc)
    if header[3] != _SETTINGS_FRAME:
        return "it answers in another protocol than Ray's gRPC (a dashboard or other HTTP port?)"
    return None


__all__ = ["check_address", "connect", "import_ray"]
