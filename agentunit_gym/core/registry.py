"""The registered domains: found through the entry-point group ``agentunit_gym.domains``.

Every domain, built-in or a third party's, is a package that exports a
:class:`~agentunit_gym.core.domain.Domain` and names it in its ``pyproject.toml``::

    [project.entry-points."agentunit_gym.domains"]
    echo = "echo_domain:DOMAIN"

Installing the package adds the domain: its env ids are registered with gymnasium when
``agentunit_gym`` is imported, and the CLI, the evaluator, the metrics and the report pick
it up. A domain that fails to load (an import error, an object that is not a ``Domain``,
a name or env id another domain already has) is set aside with the reason and never stops
the others: :func:`broken_domains` lists them, and asking for one by name raises a
:class:`~agentunit_gym.errors.DomainError` that carries the reason.

If this package was installed before its entry points existed (stale metadata of an
editable install), the built-in domains are still found by scanning the
``agentunit_gym.domains`` subpackages.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from agentunit_gym.core.domain import Domain, import_object
from agentunit_gym.errors import ConfigError, DomainError, TaskNotFoundError
from agentunit_gym.tasks.spec import TaskSpec

logger = logging.getLogger("agentunit_gym")

ENTRY_POINT_GROUP = "agentunit_gym.domains"
"""The entry-point group a package registers its domain under."""

BUILTIN_PACKAGE = "agentunit_gym.domains"
"""Where the built-in domains live (one subpackage each)."""

@dataclass(frozen=True)
class BrokenDomain:
    """A domain entry that could not be loaded."""

    name: str
    """The entry point's name (the domain's intended name)."""
    source: str
    """The entry point's target, ``module:attribute``."""
    reason: str
    """What went wrong, with the next step."""


@dataclass(frozen=True)
class _Registry:
    domains: dict[str, Domain]
    broken: tuple[BrokenDomain, ...]
    by_env: dict[str, Domain]


def _entries() -> list[tuple[str, str]]:
    """``(name, target)`` of every domain entry: the entry points, plus built-ins they miss."""
    found = [(ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
    targets = {target.partition(":")[0] for _, target in found}
    package = importlib.import_module(BUILTIN_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        module = f"{BUILTIN_PACKAGE}.{info.name}"
        if info.ispkg and module not in targets:
            found.append((info.name, f"{module}:DOMAIN"))
    # Built-ins first (stable order for tables), then third parties by name.
    return sorted(set(found), key=lambda e: (not e[1].startswith(BUILTIN_PACKAGE + "."), e[0], e[1]))


def _load(name: str, target: str) -> Domain:
    try:
        obj = import_object(target)
    except ConfigError as exc:
        raise DomainError(name, f"domain entry point {name!r} ({target}) does not load: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a third party's import may raise anything; it must not stop the others
        raise DomainError(
            name, f"domain entry point {name!r} ({target}) raised {type(exc).__name__} on import: {exc}"
        ) from exc
    if not isinstance(obj, Domain):
        raise DomainError(
            name, f"domain entry point {name!r} ({target}) is a {type(obj).__name__}, not an agentunit_gym Domain."
        )
    return obj


@functools.cache
def _registry() -> _Registry:
    domains: dict[str, Domain] = {}
    by_env: dict[str, Domain] = {}
    broken: list[BrokenDomain] = []
    for name, target in _entries():
        try:
            domain = _load(name, target)
            if domain.name in domains:
                raise DomainError(name, f"domain entry point {name!r} ({target}) names domain {domain.name!r}, "
                                        "which another package already registered; rename one of them.")
            clash = [e for e in domain.env_ids if e in by_env]
            if clash:
                raise DomainError(name, f"domain {domain.name!r} ({target}) declares env ids {clash} that domain "
                                        f"{by_env[clash[0]].name!r} already has; give them another name or version.")
            _add_image(name, domain)
        except DomainError as exc:
            logger.warning("agentunit-gym: skipping a domain: %s", exc)
            broken.append(BrokenDomain(name, target, str(exc)))
            continue
        domains[domain.name] = domain
        for env_id in domain.env_ids:
            by_env[env_id] = domain
    return _Registry(domains, tuple(broken), by_env)


def _add_image(name: str, domain: Domain) -> None:
    """Tell the image builder where the domain's declared image is built from (the builder, a
    lower layer, names no domain).

    Raises:
        DomainError: another domain declares an image of that name.
    """
    if domain.image is None:
        return
    from agentunit_gym.backends.images import ImageSource, add_image_source

    try:
        add_image_source(domain.image.name, ImageSource(domain.image.context, domain.image.generator))
    except ConfigError as exc:
        raise DomainError(name, f"domain {domain.name!r}: {exc}") from exc


def reload() -> None:
    """Forget what was found, so the next call scans the entry points again (after an install)."""
    _registry.cache_clear()


def domains() -> list[Domain]:
    """Every domain that loaded, built-ins first."""
    return list(_registry().domains.values())


def domain_names() -> list[str]:
    """The names of every domain that loaded."""
    return list(_registry().domains)


def broken_domains() -> tuple[BrokenDomain, ...]:
    """Domain entries that failed to load, each with its reason."""
    return _registry().broken


def get_domain(name: str) -> Domain:
    """The domain called ``name``.

    Raises:
        DomainError: no such domain, or its package failed to load (the message says why).
    """
    reg = _registry()
    found = reg.domains.get(name)
    if found is not None:
        return found
    for b in reg.broken:
        if b.name == name:
            raise DomainError(name, b.reason)
    raise DomainError(name, f"unknown domain {name!r}; the domains are {', '.join(reg.domains) or 'none'}.")


def full_env_id(env_id: str) -> str:
    """The namespaced id of ``env_id`` (``"OS-v0"`` -> ``"AgentUnit/OS-v0"``); unknown ids come back unchanged."""
    reg = _registry()
    if env_id in reg.by_env:
        return env_id
    for known in reg.by_env:
        if known.split("/", 1)[-1] == env_id:
            return known
    return env_id


def domain_of_env(env_id: str) -> Domain | None:
    """The domain of an env id (namespaced or short), None when no registered domain has it."""
    return _registry().by_env.get(full_env_id(env_id))


def env_ids() -> list[str]:
    """Every registered env id."""
    return list(_registry().by_env)


def register_envs(*, wrappers: Sequence[type[gym.Wrapper[Any, Any, Any, Any]]] = ()) -> None:
    """Register every env id of every domain with gymnasium (idempotent).

    No ``max_episode_steps``: the env enforces its own turn limit and reports it as TLE. Call
    :func:`agentunit_gym.wrappers.registration.register_envs`, which passes the wrappers every
    ``gym.make`` of an AgentUnit id gets (this layer names none).

    Args:
        wrappers: wrapper classes (each made with the env alone) that ``gym.make`` puts over
            the env, innermost first; an id already registered keeps its own.
    """
    # No passive env checker: after a first reset that raised (an init script failed), its
    # first step check raises TypeError (gymnasium 1.x compares the step with the missing
    # reset result), which ended an eval that reused the env. The envs pass check_env in tests.
    specs = tuple(WrapperSpec(w.__name__, f"{w.__module__}:{w.__qualname__}", {}) for w in wrappers)
    for domain in domains():
        for spec in domain.envs:
            if spec.id not in gym.registry:
                gym.register(id=spec.id, entry_point=spec.entry_point, kwargs=dict(spec.kwargs),
                             disable_env_checker=True, additional_wrappers=specs)
    _register_spelling_hints()


def _misspelled(wrong: str, env_id: str) -> Callable[..., gym.Env[str, str]]:
    def refuse(**_: object) -> gym.Env[str, str]:
        raise ConfigError(f"unknown env id {wrong!r}; did you mean {env_id}? (env ids are case-sensitive; "
                          f"registered: {', '.join(env_ids())})")
    return refuse


def _register_spelling_hints() -> None:
    """Register the other-case spellings of each id (``AgentUnit/Os-v0``, ``AgentUnit/os-v0``)
    as entries that refuse with "did you mean AgentUnit/OS-v0?": gymnasium's own suggestion
    does not catch a change of case, and a newcomer's first ``gym.make`` should not end in a
    bare "doesn't exist". Making one raises a :class:`~agentunit_gym.errors.ConfigError`."""
    real = set(env_ids())
    for env_id in sorted(real):
        namespace, _, rest = env_id.partition("/")
        name, sep, version = rest.rpartition("-v")
        for variant in sorted({name.lower(), name.upper(), name.capitalize(), name.title()} - {name}):
            wrong = f"{namespace}/{variant}{sep}{version}"
            if wrong not in real and wrong not in gym.registry:
                gym.register(id=wrong, entry_point=_misspelled(wrong, env_id), disable_env_checker=True)


def find_task(task_id: str, domain: str | None = None) -> tuple[Domain, TaskSpec]:
    """A bundled task by id, in one domain or in every registered one.

    Returns:
        ``(domain, task)``.

    Raises:
        DomainError: an unknown or broken domain was named.
        TaskNotFoundError: no bundled task has that id.
    """
    for d in [get_domain(domain)] if domain is not None else domains():
        for task in d.bundled_tasks():
            if task.id == task_id:
                return d, task
    raise TaskNotFoundError(f"no bundled task {task_id!r}; see `agentunit-gym tasks list`.")
