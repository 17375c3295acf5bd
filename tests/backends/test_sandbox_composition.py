"""The sandboxes are composed, not stacked: no class of backends/sandbox/ inherits from more than
one project class above :class:`Sandbox` (issue 35: the local sandbox was a six-level chain)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from agentunit_gym.backends import sandbox as sandbox_package
from agentunit_gym.backends.sandbox.base import Sandbox
from agentunit_gym.backends.sandbox.local import LocalSandbox


def _classes() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(sandbox_package.__path__, sandbox_package.__name__ + "."):
        if info.name.endswith("spawner_main"):
            continue  # runs as its own program inside a box
        module = importlib.import_module(info.name)
        found += [cls for _, cls in inspect.getmembers(module, inspect.isclass) if cls.__module__ == module.__name__]
    return found


def _project_bases(cls: type) -> list[type]:
    """The classes of this project ``cls`` inherits from, besides the roots every kind may share
    (``Sandbox`` itself; the error root, through which typed errors inherit)."""
    return [base for base in cls.__mro__[1:] if base.__module__.startswith("agentunit_gym.")
            and base is not Sandbox and not issubclass(base, BaseException)]


def test_the_sandbox_package_has_the_classes_this_test_looks_at() -> None:
    names = {cls.__name__ for cls in _classes()}
    assert {"LocalSandbox", "DockerSandbox", "_Boxes", "_AgentShell", "_Files", "_InPlaceReset", "_Spares",
            "_OneOffs"} <= names


def test_no_class_inherits_from_more_than_one_project_class_above_sandbox() -> None:
    deep = {cls.__qualname__: [base.__qualname__ for base in _project_bases(cls)]
            for cls in _classes() if len(_project_bases(cls)) > 1}
    assert deep == {}


def test_the_local_sandbox_is_a_sandbox_made_of_parts() -> None:
    assert LocalSandbox.__mro__[1] is Sandbox and _project_bases(LocalSandbox) == []
    parts = LocalSandbox(isolation="none", allow_unisolated=True)  # nothing starts before start()
    try:
        kinds = {type(value).__name__ for value in vars(parts).values()}
        assert {"_Setup", "_Boxes", "_AgentShell", "_OneOffs", "_Files", "_InPlaceReset", "_Spares"} <= kinds
    finally:
        parts.close()
