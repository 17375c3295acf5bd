"""Pick and open a sandbox by kind: ``docker``, ``local``, or ``auto`` (docker when a daemon answers)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox.base import Sandbox
from agentunit_gym.errors import ConfigError

logger = logging.getLogger("agentunit_gym")

SandboxKind = Literal["auto", "docker", "local"]
KINDS: tuple[str, ...] = ("auto", "docker", "local")


def resolve_kind(kind: str = "auto") -> str:
    """The concrete sandbox kind for ``kind``.

    ``auto`` becomes ``docker`` when a Docker daemon answers within a few seconds, else
    ``local``; the choice is logged in one line (logger ``agentunit_gym``, level INFO).

    Args:
        kind: ``auto``, ``docker`` or ``local``.

    Returns:
        ``docker`` or ``local``.

    Raises:
        ConfigError: ``kind`` is not one of the known kinds.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown sandbox kind {kind!r}: expected one of {', '.join(KINDS)}.")
    if kind != "auto":
        return kind
    if process.docker_available():
        logger.info("sandbox backend: docker (a Docker daemon answers)")
        return "docker"
    logger.info("sandbox backend: local (%s; using Linux namespaces)", process.docker_absence())
    return "local"


def open_sandbox(kind: SandboxKind = "auto", **options: Any) -> Sandbox:
    """Create a sandbox of ``kind`` (not started yet: it starts on first use or ``start()``).

    Args:
        kind: ``auto``, ``docker`` or ``local``.
        **options: keyword arguments of the implementation (``DockerSandbox`` or
            ``LocalSandbox``), e.g. ``image=`` for docker or ``allow_unisolated=`` for local.

    Returns:
        The sandbox.

    Raises:
        ConfigError: unknown kind, or options the implementation does not take.
    """
    resolved = resolve_kind(kind)
    cls: type[Sandbox]
    if resolved == "docker":
        from agentunit_gym.backends.sandbox.docker import DockerSandbox  # lazy: needs the docker SDK

        cls = DockerSandbox
    else:
        from agentunit_gym.backends.sandbox.local import LocalSandbox

        cls = LocalSandbox
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"invalid options for the {resolved} sandbox {sorted(options)}: {exc}") from exc
