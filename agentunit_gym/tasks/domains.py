"""Which task model each domain uses, and the bundled suites per domain.

Models are imported lazily from ``module:Class`` paths, so a domain whose code is not
installed (or not written yet) does not break the others.
"""

from __future__ import annotations

import importlib

from agentunit_gym.errors import ConfigError, TaskNotFoundError
from agentunit_gym.tasks.loader import bundled_dir, load_bundled
from agentunit_gym.tasks.spec import TaskSpec

TASK_MODELS: dict[str, str] = {
    "os": "agentunit_gym.tasks.os_spec:OSTask",
    "db": "agentunit_gym.tasks.db_spec:DBTask",
    "webshop": "agentunit_gym.domains.webshop.spec:WebShopTask",
}
"""Domain -> ``module:Class`` of its task model."""


def domains() -> list[str]:
    """Every domain with a task model entry."""
    return list(TASK_MODELS)


def task_model(domain: str) -> type[TaskSpec]:
    """The task model class of ``domain``.

    Raises:
        ConfigError: an unknown domain, or a model that cannot be imported.
    """
    target = TASK_MODELS.get(domain)
    if target is None:
        raise ConfigError(f"unknown domain {domain!r}; the domains are {', '.join(TASK_MODELS)}.")
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ConfigError(f"the {domain!r} domain's task model ({target}) is not available in this build.") from exc
    model = getattr(module, class_name, None)
    if not (isinstance(model, type) and issubclass(model, TaskSpec)):
        raise ConfigError(f"{target} is not a TaskSpec subclass.")
    return model


def available_domains() -> list[str]:
    """Domains whose task model imports and that ship a bundled suite folder."""
    found = []
    for domain in TASK_MODELS:
        try:
            task_model(domain)
        except ConfigError:
            continue
        if bundled_dir(domain).is_dir():
            found.append(domain)
    return found


def bundled_tasks(domain: str) -> list[TaskSpec]:
    """The bundled suite of ``domain``, validated by its model.

    Raises:
        ConfigError: an unknown or unavailable domain.
        TaskFileError: a bundled file does not validate.
    """
    return list(load_bundled(domain, task_model(domain)))


def find_task(task_id: str, domain: str | None = None) -> tuple[str, TaskSpec]:
    """Find a bundled task by id, in one domain or in every available one.

    Returns:
        ``(domain, task)``.

    Raises:
        TaskNotFoundError: no bundled task has that id.
    """
    for name in [domain] if domain is not None else available_domains():
        for task in bundled_tasks(name):
            if task.id == task_id:
                return name, task
    raise TaskNotFoundError(f"no bundled task {task_id!r}; see `agentunit-gym tasks list`.")
