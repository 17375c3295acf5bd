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

from agentunit_gym.core.domain import Domain, import_object
from agentunit_gym.core.registry import domain_of_env, domains, env_ids
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import KEYS, key_values
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import check_split

EXCLUDE_KEYS: tuple[str, ...] = ("id", "reference", "answer")
"""The keys ``--exclude`` compares: the same task, not the same shape of instruction (every
instance of a family shares that; a generated train set avoids the test splits by all four)."""

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


def _blocker(domain: Domain, blocks: Sequence[tuple[Sequence[TaskSpec], Sequence[str]]]) -> Callable[[TaskSpec], bool]:
    """Whether a task shares, for some ``(tasks, keys)`` of ``blocks``, one of ``keys`` with ``tasks``."""
    indexes = [(key_values(tasks, domain.task_keys), keys) for tasks, keys in blocks if tasks]

    def blocked(task: TaskSpec) -> bool:
        if not indexes:
            return False
        own = domain.task_keys(task)
        values = {"id": task.id, "instruction": own.instruction, "reference": own.reference, "answer": own.answer}
        return any(values[k] is not None and values[k] in index[k] for index, keys in indexes for k in keys)

    return blocked


def generate_checked(domain: Domain, count: int, *, seed: int = 0, split: str | None = None,
                     exclude: Sequence[TaskSpec] = ()) -> list[TaskSpec]:
    """``count`` tasks of ``domain``'s generator, checked and filtered.

    A ``train`` set holds no task that shares any overlap key (:mod:`agentunit_gym.tasks.overlap`)
    with a bundled test task; no set holds a task that shares an id, reference or answer with
    ``exclude`` (:data:`EXCLUDE_KEYS`). Tasks left out are replaced by the generator's next ones
    (a longer count extends a shorter one), so the set is the generator's first ``count`` that pass.

    Raises:
        ConfigError: the domain has no generator, a count below 1, an unknown split, fewer tasks
            available than ``count`` (the message gives how many are), or a generator that broke
            its contract (an id not ``gen-<domain>-...``, a repeated or a bundled id).
    """
    generator = domain.generator
    if generator is None:
        raise ConfigError(f"the {domain.name} domain has no task generator; domains with one: see "
                          "`agentunit-gym tasks generate --help`.")
    if count < 1:
        raise ConfigError(f"the number of tasks to generate must be at least 1, got {count}.")
    if split is not None:
        check_split(split)
        if split == "dev":
            raise ConfigError("generated tasks are train or test, not dev (dev is AgentBench's name); "
                              "pass --split train or --split test.")
    generate = import_object(generator.generate)
    tests = [t for t in domain.bundled_tasks() if t.split == "test"] if split == "train" else []
    blocked = _blocker(domain, [(tests, KEYS), (exclude, EXCLUDE_KEYS)])

    want = count
    while True:
        try:
            made: list[TaskSpec] = generate(want, seed=seed, split=split)
        except ConfigError:
            if generator.ceiling is None or not (tests or exclude):
                raise
            # Past the generator's end: all it makes, and how many of them pass.
            made = generate(int(import_object(generator.ceiling)(split)), seed=seed, split=split)
            tasks = [t for t in made if not blocked(t)]
            if len(tasks) < count:
                raise ConfigError(f"the {domain.name} generator makes {len(tasks)} distinct task(s)"
                                  f"{f' in split {split!r}' if split else ''} outside the test splits and the "
                                  f"excluded sets, {count} were asked for; ask for fewer.") from None
            break
        tasks = [t for t in made if not blocked(t)]
        if len(tasks) >= count:
            break
        want += (count - len(tasks)) * 2
    tasks = tasks[:count]
    _check_ids(domain, tasks)
    if len(tasks) != count:
        raise ConfigError(f"the {domain.name} generator made {len(tasks)} task(s), expected {count}.")
    return tasks


def _check_ids(domain: Domain, tasks: Sequence[TaskSpec]) -> None:
    prefix = f"gen-{domain.name}-"
    bundled = {t.id for t in domain.bundled_tasks()}
    seen: set[str] = set()
    for task in tasks:
        if not task.id.startswith(prefix) or task.id in bundled or task.id in seen:
            raise ConfigError(f"the {domain.name} generator made task id {task.id!r}: expected a new id "
                              f"starting with {prefix!r}, one per distinct task; fix the generator "
                              f"({domain.generator.generate if domain.generator else '?'}).")
        seen.add(task.id)


def write_generated(env_id: str, count: int, *, seed: int = 0, split: str | None = None,
                    output: str | Path, exclude: Sequence[TaskSpec] = ()) -> tuple[Domain, list[TaskSpec], Path]:
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
    tasks = domain.generate_tasks(count, seed=seed, split=split, exclude=exclude)
    items = task_items(tasks)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        text = json.dumps({"tasks": items}, indent=1, ensure_ascii=False) + "\n"
    else:
        text = yaml.safe_dump({"tasks": items}, sort_keys=False, allow_unicode=True, width=120)
    path.write_text(text, encoding="utf-8")
    return domain, tasks, path
