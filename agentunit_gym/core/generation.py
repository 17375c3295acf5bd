"""Write generated task sets: ``agentunit-gym tasks generate`` as a library call.

The generator itself is the domain's (:class:`~agentunit_gym.core.domain.TaskGenerator`);
this module picks the domain from an env id, calls it, keeps test tasks out of a train set
and the ``--exclude`` sets out of any set, and writes a native task file that ``--tasks``,
``tasks validate`` and ``tasks check`` read back.

Example:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from agentunit_gym.core.generation import write_generated
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     domain, tasks, path = write_generated("DB-v0", 20, seed=0, split="train",
    ...                                           output=Path(folder) / "db-train.json")
    ...     written = json.loads(path.read_text())["tasks"]
    >>> domain.name, len(tasks), len(written), written[0]["id"]  # an id that names the task's content
    ('db', 20, 20, 'gen-db-delete-below-388b494f93ae')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from agentunit_gym.core.domain import Domain
from agentunit_gym.core.registry import domain_of_env, domains, env_ids
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.spec import TaskSpec

DrawProgress = Callable[[int, int | None, str], None]
"""``progress(done, total, note)``: tasks drawn or checked so far (see :func:`write_generated`)."""

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The installed ``agentunit_gym`` package: generated sets are never written inside it."""


def domain_for_env(env_id: str) -> Domain:
    """The registered domain of ``env_id`` (``DB-v0`` or ``AgentUnit/DB-v0``).

    Raises:
        ConfigError: no registered domain has that env id.
    """
    domain = domain_of_env(env_id)
    if domain is None:
        raise ConfigError(f"unknown env {env_id!r}: expected one of {', '.join(env_ids()) or 'none registered'} "
                          "(the short id without 'AgentUnit/' works too).")
    return domain


def generator_env_ids() -> list[str]:
    """The env ids whose domain declares a task generator."""
    return [d.envs[0].id for d in domains() if d.generator is not None]


def task_items(tasks: list[TaskSpec]) -> list[dict[str, object]]:
    """The tasks as native task-file mappings (defaults and the loader's ``source`` left out)."""
    return [t.model_dump(mode="json", exclude_defaults=True, exclude={"source"}) for t in tasks]


def write_generated(env_id: str, count: int, *, seed: int = 0, split: str | None = None,
                    output: str | Path, exclude: Sequence[TaskSpec] = (),
                    progress: DrawProgress | None = None) -> tuple[Domain, list[TaskSpec], Path]:
    """Generate ``count`` tasks of ``env_id``'s domain and write them to ``output`` (JSON, or YAML
    by the suffix ``.yaml``/``.yml``).

    Args:
        exclude: tasks the set must not hold (``--exclude``: by id, reference or answer).

    Returns:
        The domain, the tasks and the file written.

    Raises:
        ConfigError: an unknown env, a domain without a generator, a bad count or split, fewer
            tasks available than ``count``, or an output inside the installed package (generated
            sets never go there).
    """
    domain = domain_for_env(env_id)
    path = Path(output)
    target = path.resolve()
    if target == PACKAGE_DIR or PACKAGE_DIR in target.parents:
        raise ConfigError(f"--output {path} is inside the agentunit_gym package ({PACKAGE_DIR}); generated task "
                          "sets are never written there: give a path outside it, e.g. ./generated/tasks.json.")
    if path.suffix not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"--output {path}: expected a .json, .yaml or .yml file name, found {path.suffix or 'none'}.")
    tasks = domain.generate_tasks(count, seed=seed, split=split, exclude=exclude, progress=progress)
    items = task_items(tasks)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        text = json.dumps({"tasks": items}, indent=1, ensure_ascii=False) + "\n"
    else:
        text = yaml.safe_dump({"tasks": items}, sort_keys=False, allow_unicode=True, width=120)
    path.write_text(text, encoding="utf-8")
    return domain, tasks, path
