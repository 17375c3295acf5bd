"""The module paths of the evaluator's old flat layout, kept importable.

Until issue 35 every module of the evaluator sat in ``agentunit_gym/eval/`` itself
(``agentunit_gym.eval.runner``, ``agentunit_gym.eval.stats`` ...); they now live in the
sub-packages of their stage. Code written against the old paths keeps working: importing one
gives the very module at its new path (the same classes and functions, so ``isinstance`` and
pickling agree), through a finder :mod:`agentunit_gym.eval` installs when it is imported.
New code imports the new paths (:data:`MOVED` lists them).

Example:
    >>> import agentunit_gym.eval.runner, agentunit_gym.eval.run.runner
    >>> agentunit_gym.eval.runner is agentunit_gym.eval.run.runner
    True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "info": "agents.info",
    "openai_agent": "agents.openai_agent",
    "model_client": "agents.model_client",
    "model_config": "agents.model_config",
    "model_errors": "agents.model_errors",
    "ratelimit": "agents.ratelimit",
    "retry_policy": "agents.retry_policy",
    "recording_proxy": "agents.recording_proxy",
    "fake_server": "agents.fake_server",
    "config": "plan.config",
    "routing": "plan.routing",
    "env_options": "plan.env_options",
    "records": "record.records",
    "export": "record.export",
    "trainer_columns": "record.trainer_columns",
    "runner": "run.runner",
    "episodes": "run.engine",
    "slots": "run.slots",
    "copies": "run.copies",
    "schedule": "run.schedule",
    "deadlines": "run.deadlines",
    "cluster": "run.cluster",
    "cluster_connect": "run.cluster_connect",
    "cluster_node": "run.cluster_node",
    "summary": "report.summary",
    "compare": "report.compare",
    "comparison": "report.comparison",
    "stats": "report.stats",
    "metrics": "report.metrics",
    "judge.metrics": "report.judged",
    "judge.apply": "judging",
}
"""Old path -> new path, both under ``agentunit_gym.eval``. ``agents``, ``plan`` and ``report``
were modules and are now packages that re-export what the modules held."""

_PREFIX = "agentunit_gym.eval."


def new_name(fullname: str) -> str | None:
    """The module an old path names now (a submodule of a moved package too); None for any other name."""
    if not fullname.startswith(_PREFIX):
        return None
    rest = fullname[len(_PREFIX):]
    for old, new in MOVED.items():
        if rest == old or rest.startswith(old + "."):
            return _PREFIX + new + rest[len(old):]
    return None


class OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to the module at its new path (one module object for both)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        target_name = new_name(fullname)
        if target_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=False)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(str(new_name(spec.name)))
        self._spec = module.__spec__  # the import system sets the alias's spec on it; put it back after
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec
        sys.modules[module.__name__] = module


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent), so an old path never loads a second copy."""
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())


__all__ = ["MOVED", "OldPathFinder", "install", "new_name"]
