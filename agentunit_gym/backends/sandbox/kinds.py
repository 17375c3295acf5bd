"""The sandbox kinds: found through the entry-point group ``agentunit_gym.sandboxes``, like domains.

A kind is a :class:`SandboxKind`: a name (the OS env's ``backend=``), a line for ``--help``,
and the ``"module:Class"`` of its :class:`~agentunit_gym.backends.sandbox.base.Sandbox`. The
built-in ``docker`` and ``local`` are registered in agentunit-gym's own ``pyproject.toml``; a
third-party package adds a kind by being installed (docs/sandbox-backends.md)::

    [project.entry-points."agentunit_gym.sandboxes"]
    firecracker = "my_package.kinds:FIRECRACKER"

The OS domain offers every registered kind as a backend, and ``backend="auto"`` picks the first
kind that needs Docker when a daemon answers, else the embedded one (``local``). A kind that
fails to load (an import error, an object that is not a ``SandboxKind``, a name another kind
has, a second embedded kind) is set aside with the reason (:func:`broken_kinds`) and never
stops the others; asking for it by name raises a :class:`~agentunit_gym.errors.ConfigError`
carrying the reason.

Example:

    >>> [kind.name for kind in kinds()][:2]
    ['docker', 'local']
    >>> embedded_kind().name
    'local'
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from agentunit_gym.backends.importing import import_object
from agentunit_gym.backends.sandbox.base import Sandbox
from agentunit_gym.errors import ConfigError

logger = logging.getLogger("agentunit_gym")

ENTRY_POINT_GROUP = "agentunit_gym.sandboxes"
"""The entry-point group a package registers its sandbox kind under."""


@dataclass(frozen=True)
class SandboxKind:
    """One kind of sandbox the OS env can run on.

    Declare it in a module that imports little (the kinds are read when the OS domain is
    described, at ``import agentunit_gym``); the sandbox's own module is imported only when
    one is opened.
    """

    name: str
    """The OS env's ``backend=`` value and ``agentunit-gym eval --backend``'s; lower case, an identifier."""
    description: str
    """One line for ``--help`` and the docs: what runs where."""
    sandbox: str
    """``"module:Class"`` of the :class:`~agentunit_gym.backends.sandbox.base.Sandbox` subclass,
    made with the env's sandbox options as keywords; its ``kind`` class attribute is :attr:`name`
    (a pickled env reopens its sandbox by that name)."""
    needs_docker: bool = False
    """Needs a Docker daemon: ``backend="auto"`` takes the first such kind when one answers."""
    embedded: bool = False
    """Needs no daemon: the kind ``backend=None`` runs on, and ``auto`` without Docker. Only one
    kind may say so (the built-in ``local``)."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower() or self.name == "auto":
            raise ConfigError(f"sandbox kind name {self.name!r} must be a lower-case identifier other than 'auto'.")
        if ":" not in self.sandbox:
            raise ConfigError(f"sandbox kind {self.name!r}: sandbox {self.sandbox!r} must be 'module:Class'.")

    def sandbox_class(self) -> type[Sandbox]:
        """The kind's sandbox class (imported now).

        Raises:
            ConfigError: it does not import, or is not a ``Sandbox`` subclass of this kind.
        """
        cls = import_object(self.sandbox)
        if not (isinstance(cls, type) and issubclass(cls, Sandbox)):
            raise ConfigError(f"sandbox kind {self.name!r}: {self.sandbox} is not a Sandbox subclass.")
        if getattr(cls, "kind", None) != self.name:
            raise ConfigError(f"sandbox kind {self.name!r}: {self.sandbox}.kind is {getattr(cls, 'kind', None)!r}; "
                              f"set the class attribute kind = {self.name!r} (a pickled env reopens by it).")
        return cls

    def open(self, **options: Any) -> Sandbox:
        """A new sandbox of this kind (not started yet: it starts on first use or ``start()``).

        Raises:
            ConfigError: the class does not load, or takes none of ``options``.
        """
        cls = self.sandbox_class()
        try:
            return cls(**options)
        except TypeError as exc:
            raise ConfigError(f"invalid options for the {self.name} sandbox {sorted(options)}: {exc}") from exc


@dataclass(frozen=True)
class BrokenKind:
    """A sandbox-kind entry that could not be loaded."""

    name: str
    source: str
    """The entry point's target, ``module:attribute``."""
    reason: str


@dataclass(frozen=True)
class _Registry:
    kinds: dict[str, SandboxKind]
    broken: tuple[BrokenKind, ...]


_BUILTIN_MODULE = __name__


def _entries() -> list[tuple[str, str]]:
    """``(name, target)`` of every entry, agentunit-gym's own first, then third parties' by name.

    An editable install whose metadata predates the group has no entry for the built-ins: they
    are added from this module then, so such an install keeps working until it is reinstalled."""
    found = {(ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    builtin = f"{_BUILTIN_MODULE}:"
    if not any(target.startswith(builtin) for _, target in found):
        found |= {(kind.name, builtin + attr) for attr, kind in _BUILTINS.items()}
    return sorted(found, key=lambda e: (not e[1].startswith(builtin), e[0], e[1]))


def _load(name: str, target: str) -> SandboxKind:
    try:
        obj = import_object(target)
    except ConfigError as exc:
        raise ConfigError(f"sandbox kind entry point {name!r} ({target}) does not load: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a third party's import may raise anything; it must not stop the others
        raise ConfigError(f"sandbox kind entry point {name!r} ({target}) raised {type(exc).__name__} "
                          f"on import: {exc}") from exc
    if not isinstance(obj, SandboxKind):
        raise ConfigError(f"sandbox kind entry point {name!r} ({target}) is a {type(obj).__name__}, "
                          "not an agentunit_gym SandboxKind.")
    if obj.name != name:
        raise ConfigError(f"sandbox kind entry point {name!r} ({target}) declares the name {obj.name!r}; "
                          "make the entry point's name and the kind's the same.")
    return obj


@functools.cache
def _registry() -> _Registry:
    kinds: dict[str, SandboxKind] = {}
    broken: list[BrokenKind] = []
    for name, target in _entries():
        try:
            kind = _load(name, target)
            if kind.name in kinds:
                raise ConfigError(f"sandbox kind {name!r} ({target}) is registered twice; rename one of them.")
            if kind.embedded and any(k.embedded for k in kinds.values()):
                raise ConfigError(f"sandbox kind {name!r} ({target}) says it is embedded, but "
                                  f"{_embedded_name(kinds)!r} is the embedded default; set embedded=False.")
        except ConfigError as exc:
            logger.warning("agentunit-gym: skipping a sandbox kind: %s", exc)
            broken.append(BrokenKind(name, target, str(exc)))
            continue
        kinds[kind.name] = kind
    return _Registry(kinds, tuple(broken))


def _embedded_name(kinds: dict[str, SandboxKind]) -> str:
    return next(k.name for k in kinds.values() if k.embedded)


def reload() -> None:
    """Forget what was found, so the next call reads the entry points again (after an install)."""
    _registry.cache_clear()


def kinds() -> list[SandboxKind]:
    """Every kind that loaded, agentunit-gym's own first."""
    return list(_registry().kinds.values())


def kind_names() -> tuple[str, ...]:
    """The names of every kind that loaded."""
    return tuple(_registry().kinds)


def broken_kinds() -> tuple[BrokenKind, ...]:
    """Kind entries that failed to load, each with its reason."""
    return _registry().broken


def get_kind(name: str) -> SandboxKind:
    """The kind called ``name``.

    Raises:
        ConfigError: no such kind, or its package failed to load (the message says why).
    """
    registry = _registry()
    if name in registry.kinds:
        return registry.kinds[name]
    for broken in registry.broken:
        if broken.name == name:
            raise ConfigError(broken.reason)
    raise ConfigError(f"unknown sandbox kind {name!r}: expected auto or one of {', '.join(registry.kinds)}.")


def embedded_kind() -> SandboxKind:
    """The kind that needs no daemon (``local``).

    Raises:
        ConfigError: none is registered (agentunit-gym's own entry points are missing).
    """
    for kind in kinds():
        if kind.embedded:
            return kind
    raise ConfigError("no embedded sandbox kind is registered; reinstall agentunit-gym (pip install -e .).")


DOCKER = SandboxKind(
    "docker", "one container per env from the project's image, --network none",
    sandbox="agentunit_gym.backends.sandbox.docker:DockerSandbox", needs_docker=True,
)
"""The built-in ``docker`` kind (docs/sandbox-docker.md)."""

LOCAL = SandboxKind(
    "local", "Linux namespaces on the host (bubblewrap or unshare), no daemon",
    sandbox="agentunit_gym.backends.sandbox.local:LocalSandbox", embedded=True,
)
"""The built-in ``local`` kind (docs/sandbox-local.md)."""

_BUILTINS = {"DOCKER": DOCKER, "LOCAL": LOCAL}
"""agentunit-gym's own kinds by attribute, for an install whose metadata predates the group
(``pyproject.toml`` registers the same; a test holds the two equal)."""
