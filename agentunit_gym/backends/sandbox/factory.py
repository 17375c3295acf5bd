"""Pick and open a sandbox by kind: ``auto`` (a Docker kind when a daemon answers, else the
embedded one) or any registered kind (:mod:`agentunit_gym.backends.sandbox.kinds`: ``docker``,
``local`` and third parties')."""

from __future__ import annotations

import logging
from typing import Any

from agentunit_gym.backends import process
from agentunit_gym.backends.sandbox.base import Sandbox
from agentunit_gym.backends.sandbox.kinds import embedded_kind, get_kind, kind_names, kinds

logger = logging.getLogger("agentunit_gym")


def __getattr__(name: str) -> Any:
    # ``KINDS``: ``auto`` and every registered kind, read from the registry when asked (a kind
    # installed later shows up after ``kinds.reload()``), like the other factories' constant.
    if name == "KINDS":
        return ("auto", *kind_names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_kind(kind: str = "auto") -> str:
    """The concrete sandbox kind for ``kind``.

    ``auto`` becomes the first registered kind that needs Docker (``docker``) when a Docker
    daemon answers within a few seconds, else the embedded kind (``local``); the choice is
    logged in one line (logger ``agentunit_gym``, level INFO).

    Args:
        kind: ``auto`` or a registered kind's name.

    Returns:
        A registered kind's name.

    Raises:
        ConfigError: ``kind`` is not a registered kind (the message lists them, or says why
            the package that registers it failed to load).
    """
    if kind != "auto":
        return get_kind(kind).name
    with_docker = next((k for k in kinds() if k.needs_docker), None)
    if with_docker is not None and process.docker_available():
        logger.info("sandbox backend: %s (a Docker daemon answers)", with_docker.name)
        return with_docker.name
    local = embedded_kind()
    logger.info("sandbox backend: %s (%s; %s)", local.name, process.docker_absence(), local.description)
    return local.name


def open_sandbox(kind: str = "auto", **options: Any) -> Sandbox:
    """Create a sandbox of ``kind`` (not started yet: it starts on first use or ``start()``).

    Args:
        kind: ``auto`` or a registered kind's name (``docker``, ``local``, a third party's).
        **options: keyword arguments of the kind's sandbox class (``DockerSandbox``,
            ``LocalSandbox`` ...), e.g. ``image=`` for docker or ``allow_unisolated=`` for local.

    Returns:
        The sandbox.

    Raises:
        ConfigError: unknown kind, or options the implementation does not take.
    """
    return get_kind(resolve_kind(kind)).open(**options)
