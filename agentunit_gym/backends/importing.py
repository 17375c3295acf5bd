"""``"module:attribute"`` targets, the way entry points and the domains' descriptions name code:
one resolver for the domains (core), the sandbox kinds (backends) and the commands (cli)."""

from __future__ import annotations

import importlib
from typing import Any

from agentunit_gym.errors import ConfigError


def import_object(target: str) -> Any:
    """The object named by ``"module:attribute"`` (dotted attributes allowed).

    Raises:
        ConfigError: a malformed target, a module that does not import, or a missing attribute.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{target!r} must be 'module:attribute'.")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} (from {target!r}): {exc}") from exc
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ConfigError(f"{module_name!r} has no attribute {attribute!r} (from {target!r}).") from exc
    return obj
