"""OpenEnv's server API, from whichever distribution installed it: the one place we import it.

OpenEnv's ``openenv`` import package comes under two distribution names: ``openenv-core``
(0.3, what the ``serve`` extra installs) and ``openenv`` (OpenEnv's current name, 0.4 on;
0.10 in October 2026). Both keep the server API in one place, ``openenv.core.env_server``
(``create_app``, ``ConcurrencyConfig``, ``Environment`` and the wire types), and the env
server runs on both: tests/serve passes on openenv-core 0.3.0 and on openenv 0.10.0.

This module imports that API once, records which distribution provides it, and turns a
failed import into an error that names the way out: no OpenEnv at all (the pip line), or an
OpenEnv whose API moved (the versions that work).

Why the ``serve`` extra stays on ``openenv-core``: every ``openenv`` from 0.4.2 to 0.10.0
requires ``fastmcp>=3,<4``, every fastmcp 3 requires ``mcp>=1.24,<2``, and the ``mcp`` and
``integrations`` extras need mcp 2.0 (our MCP server uses mcp 2's API; verifiers 0.4 pins
``mcp==2.0.0``). docs/serving.md, "OpenEnv's two packages", says what a user of ``openenv``
can run.

Example (with the serve extra installed; ``openenv 0.10.0`` where that is what runs):

    >>> from agentunit_gym.serve.openenv_api import load_server_api
    >>> api = load_server_api()
    >>> api.create_app.__module__, api.ConcurrencyConfig(max_concurrent_envs=4).max_concurrent_envs
    ('openenv.core.env_server.http_server', 4)
    >>> api.description  # doctest: +SKIP
    'openenv-core 0.3.0'
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentunit_gym.errors import DependencyVersionError, MissingDependencyError

DISTRIBUTIONS = ("openenv-core", "openenv")
"""The distributions that install the ``openenv`` import package, the ``serve`` extra's first."""

WORKS_WITH = "OpenEnv's server API (openenv-core 0.3.x, the serve extra's; or openenv 0.10.x)"
"""The versions the env server is tested on, as an error message names them."""

OPENENV_ADVICE = ("uninstall OpenEnv first (pip uninstall -y openenv openenv-core: both write the openenv import "
                  'package); or, to keep the openenv distribution, pip install "openenv>=0.10,<0.11" and skip the '
                  "mcp and integrations extras (they need mcp 2, which openenv 0.10 excludes): docs/serving.md, "
                  "\"OpenEnv's two packages\".")

_PURPOSE = "agentunit-gym serve"

# Where each part lives in openenv.core.env_server, the same in openenv-core 0.3 and openenv 0.10.
_LAYOUT: dict[str, tuple[str, str]] = {
    "create_app": ("openenv.core.env_server", "create_app"),
    "ConcurrencyConfig": ("openenv.core.env_server.types", "ConcurrencyConfig"),
    "Environment": ("openenv.core.env_server.interfaces", "Environment"),
    "Action": ("openenv.core.env_server.types", "Action"),
    "Observation": ("openenv.core.env_server.types", "Observation"),
    "State": ("openenv.core.env_server.types", "State"),
    "EnvironmentMetadata": ("openenv.core.env_server.types", "EnvironmentMetadata"),
}


@dataclass(frozen=True)
class OpenEnvServerAPI:
    """The parts of OpenEnv's server the env server builds on, named as OpenEnv names them."""

    create_app: Callable[..., Any]
    ConcurrencyConfig: type[Any]
    Environment: type[Any]
    Action: type[Any]
    Observation: type[Any]
    State: type[Any]
    EnvironmentMetadata: type[Any]
    installed: dict[str, str]
    """The OpenEnv distributions installed, name -> version (both, when a user installed both)."""

    @property
    def description(self) -> str:
        """``"openenv 0.10.0"``; both distributions when both are installed."""
        return " and ".join(f"{name} {version}" for name, version in self.installed.items()) or "openenv (unknown)"

    @property
    def clash(self) -> str | None:
        """Why having both distributions is a trap, None when only one is installed."""
        if len(self.installed) < 2:
            return None
        return (f"{self.description} are both installed; they share the openenv import package, so the files of the "
                "one installed last run, and uninstalling either breaks the other. Keep one: "
                'pip uninstall -y openenv openenv-core && pip install "agentunit-gym[serve]" '
                "(docs/serving.md, \"OpenEnv's two packages\").")


def installed_distributions(version_of: Callable[[str], str] = importlib.metadata.version) -> dict[str, str]:
    """The OpenEnv distributions installed, name -> version, in :data:`DISTRIBUTIONS` order."""
    found: dict[str, str] = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = version_of(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def load_server_api(*, import_module: Callable[[str], ModuleType] = importlib.import_module,
                    version_of: Callable[[str], str] = importlib.metadata.version) -> OpenEnvServerAPI:
    """Import OpenEnv's server API from the installed distribution.

    Args:
        import_module: how a module is imported (tests pass a fake layout).
        version_of: a distribution's version, raising ``PackageNotFoundError`` when absent.

    Returns:
        The API, with the distributions that provide it.

    Raises:
        MissingDependencyError: no OpenEnv distribution is installed (the serve extra's pip line).
        DependencyVersionError: one is, but its server API is not where these versions have it
            (the message names what is installed and the versions that work).
    """
    installed = installed_distributions(version_of)
    parts: dict[str, Any] = {}
    try:
        for name, (module, attribute) in _LAYOUT.items():
            parts[name] = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        if not installed:
            raise MissingDependencyError("openenv-core", "serve", _PURPOSE) from exc
        found = " and ".join(f"{n} {v}" for n, v in installed.items())
        raise DependencyVersionError(
            "openenv-core", "serve", _PURPOSE, found=f"{found} (importing its server API failed: {exc})",
            works_with=WORKS_WITH, advice=OPENENV_ADVICE) from exc
    return OpenEnvServerAPI(**parts, installed=installed)

