"""The declarative description every domain package exports: one place for a domain's facts.

A domain (OS, DB, KG, WebShop, or a third party's) is one package,
``agentunit_gym/domains/<name>/`` for the built-in ones, that exports a frozen
:class:`Domain` and registers it under the Python entry-point group
``agentunit_gym.domains`` (see :mod:`agentunit_gym.core.registry`). Everything above
``core`` (gymnasium registration, the ``tasks`` commands, the eval CLI's ``--backend``
choices and backend routing, the chat agent's prompts, the metrics catalog, the summary
and the report) reads these descriptions and never names a domain itself.

A minimal description (the full walk-through is docs/domains.md)::

    DOMAIN = Domain(
        name="echo",
        title="Echo",
        envs=(EnvSpec("AgentUnit/Echo-v0", "echo_domain.env:EchoEnv"),),
        step_limit=5,
        backends=(BackendSpec("inline", "in-process, no daemon", embedded=True),),
        task_model=EchoTask,
        suite=Path(__file__).parent / "suite",
        prompt=Prompt(system="You repeat words.", example=(ExampleStep(...),)),
    )

The description is data: building it must not start containers, open connections or
import heavy libraries. The env class is named by an entry-point string and imported only
when an env is made.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from agentunit_gym.backends.importing import import_object
from agentunit_gym.core.conversation import ConversationBuilder
from agentunit_gym.core.domain_metrics import DomainMetric, Headline, ReportSection
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.loader import LoadProblem, LoadResult, collect_tasks
from agentunit_gym.tasks.overlap import TaskKeysOf, default_task_keys
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import assign_splits, family_of

__all__ = [
    "BackendSpec",
    "Domain",
    "DomainImage",
    "DomainMetric",
    "EnvSpec",
    "ExampleStep",
    "Headline",
    "LoadProblem",
    "LoadResult",
    "Prompt",
    "ProtocolPreset",
    "ReportSection",
    "TaskGenerator",
    "TaskLoader",
    "ToolAlias",
    "import_object",
]

_NAME_PATTERN = "a lowercase identifier such as 'os' or 'webshop'"


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@dataclass(frozen=True)
class EnvSpec:
    """One gymnasium env id of the domain.

    Bump the ``-vN`` suffix when observations, rewards or the task set change.
    """

    id: str
    """Namespaced, versioned id, e.g. ``"AgentUnit/OS-v0"``."""
    entry_point: str
    """``"module:Class"`` of the env (a :class:`~agentunit_gym.core.env.AgentEnv` subclass),
    imported only when the env is made."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments ``gym.make`` passes to the env by default (a variant of the same class)."""

    def __post_init__(self) -> None:
        if "/" not in self.id or "-v" not in self.id:
            raise ConfigError(f"env id {self.id!r} must look like 'Namespace/Name-vN'.")
        if ":" not in self.entry_point:
            raise ConfigError(f"env entry point {self.entry_point!r} must be 'module:Class'.")
        object.__setattr__(self, "kwargs", _frozen_mapping(self.kwargs))

    @property
    def short_id(self) -> str:
        """The id without its namespace (``"OS-v0"``), accepted by the eval CLI."""
        return self.id.split("/", 1)[1]


@dataclass(frozen=True)
class BackendSpec:
    """One backend an env of the domain can run on.

    The env's constructor takes ``backend=<name>`` (or ``"auto"``) and opens it through
    :meth:`Domain.open_backend`, which calls the domain's :attr:`Domain.backend_factory`.
    """

    name: str
    """Value of the env's ``backend=`` option and of ``agentunit-gym eval --backend``."""
    description: str
    """One line for ``--help`` and docs: what runs where."""
    embedded: bool = False
    """Runs in-process or on the host with no daemon. Exactly one backend of a domain is the
    embedded default, the one ``backend="auto"`` falls back to."""
    needs_docker: bool = False
    """Needs a Docker daemon (``backend="auto"`` prefers it when one answers)."""
    options_from: tuple[str, ...] | None = None
    """``"module:callable"`` targets (a class, a function) whose keyword parameters are the
    options this backend takes through the env's ``**options`` (``eval --env-option
    ENV:KEY=VALUE`` is checked against them and the env's own keywords); ``()``: it takes none.
    None: not declared, and such options are not checked."""

    def option_names(self) -> frozenset[str] | None:
        """The keyword options :attr:`options_from` names (imported now), or None when undeclared.

        Raises:
            ConfigError: a target that does not import.
        """
        if self.options_from is None:
            return None
        names: set[str] = set()
        for target in self.options_from:
            params = inspect.signature(import_object(target)).parameters.values()
            names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        return frozenset(names)


@dataclass(frozen=True)
class DomainImage:
    """The Docker image a domain's container backend runs (``agentunit-gym images build`` builds it).

    Its Dockerfile starts with ``ARG BASE_IMAGE`` and ``FROM ${BASE_IMAGE}``; the tag is
    ``agentunit-gym/<name>:<hash of the context>`` (see :mod:`agentunit_gym.backends.images`).
    """

    name: str
    """The image's name, as ``agentunit-gym images build NAME`` and the backend ask for it."""
    context: Path
    """The build context: a folder with the Dockerfile, shipped as package data."""
    generator: str | None = None
    """A module completing the context with generated files (``context_key() -> str`` and
    ``prepare_context(folder)``, e.g. the KG image's graph); None when the folder is all of it."""


@dataclass(frozen=True)
class TaskLoader:
    """A task-file format the domain reads besides its native YAML/JSON task files.

    Native files (the task model's fields, see :mod:`agentunit_gym.tasks.loader`) are read by
    every domain; a ``TaskLoader`` adds a foreign format, e.g. AgentBench's.
    """

    name: str
    """Short format name, e.g. ``"agentbench"``."""
    description: str
    """What the format is and which files or folders it expects."""
    detect: Callable[[Path], bool]
    """Whether ``path`` (a file or folder) is in this format. Cheap and side-effect free:
    looks at names and at most the first bytes, never raises for a readable path."""
    load: Callable[[Path], LoadResult]
    """Read ``path``: the tasks that converted (instances of the domain's task model, with
    AgentBench's stable ids where the format has them) and one problem per item that did not.
    Raises :class:`~agentunit_gym.errors.TaskFileError` only when nothing can be read at all."""


@dataclass(frozen=True)
class TaskGenerator:
    """The domain's task generator: seeded, ids that name content, a reference solution per task.

    ``generate`` names (``"module:function"``, imported on first use, so the description
    stays cheap to build) a function ``generate(count, *, seed=0, split=None) -> list[TaskSpec]``
    that returns ``count`` distinct tasks of the domain's task model, each with a reference
    solution its oracle replay scores 1 on, ``template`` set to its family and ``split`` to that
    family's split, and an id that names its content (:func:`~agentunit_gym.tasks.overlap.content_id`:
    ``gen-<domain>-<family>-<hash of what was drawn>``), so the same task has the same id in every
    seed and set. The same ``(count, seed, split)`` gives the same tasks; a longer ``count``
    extends a shorter one. With ``split`` only the families of that split are used (see
    :mod:`agentunit_gym.tasks.splits`). When ``count`` is more than the families make it raises
    :class:`~agentunit_gym.errors.ConfigError` with the number available.

    ``templates`` names a function ``templates() -> tuple[str, ...]``: every family the
    generator can produce (for tests and ``docs``).
    """

    description: str
    """One line: what the generated tasks are and what their space is."""
    generate: str
    """``"module:function"`` of the generator (see above)."""
    templates: str
    """``"module:function"`` listing the generator's families."""
    ceiling: str | None = None
    """``"module:function"`` of ``ceiling(split) -> int``: how many distinct tasks the generator
    makes in ``split`` (None: every split); None here when it is too large to count."""


@dataclass(frozen=True)
class ExampleStep:
    """One turn of the worked example shown to a chat agent before the real task.

    The same step is written twice, so the ReAct and the tool-calling prompt show the same
    episode: ``react`` is the reply in the domain's AgentBench grammar, ``tool`` and
    ``arguments`` the same action as a tool call.
    """

    observation: str
    """What the agent reads before this turn: the task for the first step, then the env's output."""
    react: str
    """The reply in the domain's ReAct grammar (``Think: ...\\nAct: ...``)."""
    tool: str
    """The tool of the same action, as in the env's tool table."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The tool call's arguments."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _frozen_mapping(self.arguments))


@dataclass(frozen=True)
class Prompt:
    """What the OpenAI-compatible chat agent is told about the domain."""

    system: str
    """The system text: who the agent is and how a turn goes (the grammar is appended from
    the env's ``info["grammar"]`` in ReAct mode)."""
    example: tuple[ExampleStep, ...] = ()
    """One worked example as prior turns (AgentBench's one-shot style); empty for none."""


@dataclass(frozen=True)
class ToolAlias:
    """One tool as another benchmark release names it, mapped onto a tool of the env.

    AgentBench FC calls the OS shell tool ``bash_action`` where the env has ``bash``: an
    agent under that protocol sees :attr:`schema` and its calls reach :attr:`tool`.
    """

    schema: Mapping[str, Any]
    """The OpenAI function-tool schema the agent sees: ``{"type": "function", "function": {...}}``."""
    tool: str
    """The env's tool a call of this alias becomes."""
    arguments: Mapping[str, str | None] = field(default_factory=dict)
    """Alias argument -> env argument; None drops the argument (e.g. a ``thought``). Arguments
    not named here keep their name."""

    def __post_init__(self) -> None:
        function = self.schema.get("function") if isinstance(self.schema, Mapping) else None
        if not isinstance(function, Mapping) or not function.get("name"):
            raise ConfigError(f"tool alias for {self.tool!r}: schema must be {{'type': 'function', "
                              "'function': {'name': ...}}.")
        object.__setattr__(self, "schema", _frozen_mapping(self.schema))
        object.__setattr__(self, "arguments", _frozen_mapping(self.arguments))

    @property
    def name(self) -> str:
        """The tool name the agent calls."""
        return str(self.schema["function"]["name"])


@dataclass(frozen=True)
class ProtocolPreset:
    """What the domain changes under a named evaluation protocol (``eval --protocol NAME``,
    ``make_eval_env(env_id, protocol=NAME)``).

    The protocol switch (:mod:`agentunit_gym.wrappers.protocols`) applies the protocol's generic
    settings (for ``agentbench``: end the episode on an invalid action, the domain's
    :attr:`Domain.step_limit` for every task) and this preset, which adds what only the domain knows.
    """

    env_options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for the domain's env under this protocol (e.g. an observation cap)."""
    tools: tuple[ToolAlias, ...] = ()
    """The tool schemas agents see instead of the env's own; empty keeps the env's."""
    ending_issues: frozenset[str] | None = None
    """Which invalid replies end the episode under this protocol's ``terminate`` policy, named
    by their ``info["action_error"]["issue"]`` (``no_call``, ``unknown_tool``, ``not_allowed``
    ...). None: every invalid reply (the generic rule). The benchmark's own loop decides:
    AgentBench's KG task answers every failed call with its error text and goes on
    (``frozenset()``); its WebShop task ends only on a reply with no action it can parse."""
    conversation: ConversationBuilder | None = None
    """Builds, from the user's AgentBench checkout (a ``Path``), the conversation the benchmark
    opens an episode with under this protocol (:mod:`agentunit_gym.core.conversation`); None
    keeps the chat agent's own system message and worked example."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "env_options", _frozen_mapping(self.env_options))
        if self.ending_issues is not None:
            object.__setattr__(self, "ending_issues", frozenset(self.ending_issues))


@dataclass(frozen=True)
class Domain:
    """Everything agentunit-gym needs to know about one domain.

    Build it once at import of the domain package (as ``DOMAIN``) and register it under the
    entry-point group ``agentunit_gym.domains``; see :mod:`agentunit_gym.core.registry`.

    Raises:
        ConfigError: an inconsistent description (no embedded backend, a duplicate backend,
            a step limit below 1 ...), at construction, so a broken domain fails when it loads.
    """

    name: str
    """Short lowercase name (``"os"``, ``"db"``): ``info["domain"]``, ``--domain`` values, trace field."""
    title: str
    """Human name for tables and the report (``"OS interaction"``)."""
    envs: tuple[EnvSpec, ...]
    """The gymnasium ids of the domain (at least one)."""
    step_limit: int
    """AgentBench's turn limit for the domain: the env's default ``max_steps`` and
    ``LimitEpisode``'s default. A task's own ``max_steps`` overrides it."""
    backends: tuple[BackendSpec, ...]
    """The backends the env accepts as ``backend=``; one of them is ``embedded``."""
    task_model: type[TaskSpec]
    """The frozen pydantic model of a task (a :class:`~agentunit_gym.tasks.spec.TaskSpec` subclass)."""
    prompt: Prompt
    """System text and worked example for the chat agent."""
    suite: Path | None = None
    """Folder of the bundled suite (package data, native task files); None for none."""
    loaders: tuple[TaskLoader, ...] = ()
    """Foreign task formats (AgentBench's), tried before the native format."""
    traps: Path | None = None
    """The bundled trap library (YAML, see :mod:`agentunit_gym.wrappers.traps`); None for none."""
    metrics: tuple[DomainMetric, ...] = ()
    """Metrics only this domain has."""
    headline: Headline | None = None
    """The benchmark's headline number; None when the catalog's success rate is the headline."""
    report_sections: tuple[ReportSection, ...] = ()
    """Extra blocks of the report for runs with episodes of this domain."""
    description: str = ""
    """A paragraph for ``docs`` and ``tasks list``: what the agent does in this domain."""
    protocols: Mapping[str, ProtocolPreset] = field(default_factory=dict)
    """Per evaluation protocol (``"agentbench"``, ``"agentbench-fc"``), what this domain sets
    under it: env options and the tool schemas of that benchmark release. A protocol the
    domain does not name runs with the generic settings only."""
    criteria: Path | None = None
    """The judge's reviewed default criteria (a YAML file, ``docs/judge.md``); None: the judge's
    critic proposes them from the run's episodes."""
    generator: TaskGenerator | None = None
    """How to make more tasks (``agentunit-gym tasks generate``); None when the domain has no generator."""
    task_keys: TaskKeysOf = default_task_keys
    """How two tasks of the domain are the same task: a task's instruction, reference and answer
    keys (:mod:`agentunit_gym.tasks.overlap`; ``tasks overlap`` and generated train sets read them)."""
    task_family: Callable[[TaskSpec], str] = family_of
    """The family of a bundled task (what it is an instance of), from which its split follows
    (:func:`agentunit_gym.tasks.splits.split_of_family`). Default: its ``template``, else its id."""
    destructive_check: Callable[[str], bool | None] | None = None
    """The domain's own reading of an action's text (``info["action"]``'s arguments) as
    destructive, used by :class:`~agentunit_gym.wrappers.traps.InjectTraps` for the DESTRUCTIVE
    flag instead of the trap library's ``destructive_patterns``: True or False when it can tell
    (the DB domain parses the SQL), None to let the patterns decide (its parser is not
    installed). None here: the patterns alone."""
    backend_factory: str | None = None
    """``"module:function"`` that opens a backend of the domain: ``factory(kind, **options)``
    with ``kind`` ``"auto"`` or one of :attr:`backends` (already checked), returning the open
    backend; it decides what ``auto`` becomes. Imported on first use, so a domain reuses a
    shared engine (``agentunit_gym.backends.sql.factory:open_sql_backend``) without importing
    it here. None: the env opens nothing (an in-process domain), and :meth:`open_backend` refuses."""
    cli: str | None = None
    """``"module:function"`` of ``register(subparsers)``, which adds the domain's own commands to
    ``agentunit-gym`` (e.g. ``agentunit-gym webshop serve``); imported only when the CLI builds
    its parser. None: the domain brings no command."""
    image: DomainImage | None = None
    """The Docker image the domain's container backend runs, when it has one (``agentunit-gym
    images build`` builds it with the others). None: no image of its own."""
    network: bool = False
    """The domain's env takes ``network=True`` (the evaluator's ``--network`` passes it): its
    backend can then reach the network, for tasks that declare ``needs_network``. A domain
    without it is unaffected by ``--network``, and its tasks that need the network are never
    run."""

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier() or self.name != self.name.lower():
            raise ConfigError(f"domain name {self.name!r} must be {_NAME_PATTERN}.")
        if not self.envs:
            raise ConfigError(f"domain {self.name!r} declares no env id.")
        if not isinstance(self.step_limit, int) or self.step_limit < 1:
            raise ConfigError(f"domain {self.name!r}: step_limit must be an integer of at least 1.")
        names = [b.name for b in self.backends]
        if len(set(names)) != len(names) or "auto" in names:
            raise ConfigError(f"domain {self.name!r}: backend names must be unique and not 'auto', got {names}.")
        if sum(b.embedded for b in self.backends) != 1:
            raise ConfigError(f"domain {self.name!r}: exactly one backend must be the embedded default.")
        if not (isinstance(self.task_model, type) and issubclass(self.task_model, TaskSpec)):
            raise ConfigError(f"domain {self.name!r}: task_model must be a TaskSpec subclass.")
        loader_names = [lo.name for lo in self.loaders]
        if "native" in loader_names or len(set(loader_names)) != len(loader_names):
            raise ConfigError(f"domain {self.name!r}: loader names must be unique and not 'native'.")
        for what, target in (("backend_factory", self.backend_factory), ("cli", self.cli)):
            if target is not None and ":" not in target:
                raise ConfigError(f"domain {self.name!r}: {what} {target!r} must be 'module:function'.")
        object.__setattr__(self, "protocols", _frozen_mapping(self.protocols))

    # ------------------------------------------------------------ envs and backends

    @property
    def env_ids(self) -> tuple[str, ...]:
        """Every env id of the domain."""
        return tuple(e.id for e in self.envs)

    @property
    def backend_names(self) -> tuple[str, ...]:
        """The concrete backend names (``auto`` is always accepted besides them)."""
        return tuple(b.name for b in self.backends)

    @property
    def embedded_backend(self) -> BackendSpec:
        """The backend that needs no daemon: what ``backend="auto"`` falls back to."""
        return next(b for b in self.backends if b.embedded)

    def backend(self, name: str) -> BackendSpec:
        """The backend called ``name``.

        Raises:
            ConfigError: the domain has no such backend.
        """
        for b in self.backends:
            if b.name == name:
                return b
        raise ConfigError(
            f"the {self.name} domain has no backend {name!r}; use auto or one of {', '.join(self.backend_names)}."
        )

    def check_backend(self, kind: str) -> str:
        """``kind`` when it is ``"auto"`` or one of the domain's backends.

        Raises:
            ConfigError: any other name (the message lists the domain's backends).
        """
        if kind != "auto":
            self.backend(kind)
        return kind

    def open_backend(self, kind: str, **options: Any) -> Any:
        """Open backend ``kind`` (``"auto"`` or a backend name) through :attr:`backend_factory`.

        Args:
            kind: ``"auto"`` or one of :attr:`backend_names`.
            **options: passed to the factory (a DSN, an endpoint, an image ...).

        Returns:
            What the factory returns: the domain's backend object (a sandbox, a SQL backend ...).

        Raises:
            ConfigError: an unknown backend name, or a domain without a factory.
            BackendUnavailableError: the factory could not open the backend here.
        """
        self.check_backend(kind)
        if self.backend_factory is None:
            raise ConfigError(f"the {self.name} domain declares no backend_factory: its env opens no backend.")
        return import_object(self.backend_factory)(kind, **options)

    # ------------------------------------------------------------------- tasks

    def bundled_tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The bundled suite, validated by the task model, each task with its ``split`` (cached per process).

        Args:
            split: ``train`` or ``test`` for that split only; None for every task.

        Raises:
            TaskFileError: a bundled file does not validate.
            ConfigError: an unknown split name.
        """
        if self.suite is None:
            return []
        from agentunit_gym.tasks.splits import filter_split

        tasks = list(_bundled_with_splits(self.suite, self.task_model, self.task_family))
        return filter_split(tasks, split, where=f"the bundled {self.name} suite")

    def generate_tasks(self, count: int, *, seed: int = 0, split: str | None = None,
                       exclude: Sequence[TaskSpec] = (),
                       progress: Callable[[int, int | None, str], None] | None = None) -> list[TaskSpec]:
        """``count`` generated tasks (see :class:`TaskGenerator`); a ``train`` set holds no task that
        shares an overlap key with a bundled test task, and no set one that shares an id, reference
        or answer with ``exclude`` (:func:`agentunit_gym.tasks.generated.draw_checked`).

        Raises:
            ConfigError: the domain has no generator, a count below 1, an unknown split, fewer
                tasks available than asked for (the message gives the number), or a generator
                that broke its contract (an id not ``gen-<domain>-...``, a repeated or bundled id).
        """
        from agentunit_gym.tasks.generated import draw_checked

        if self.generator is None:
            raise ConfigError(f"the {self.name} domain has no task generator; domains with one: see "
                              "`agentunit-gym tasks generate --help`.")
        tests = [t for t in self.bundled_tasks() if t.split == "test"] if split == "train" else []
        ceiling = import_object(self.generator.ceiling) if self.generator.ceiling else None
        return draw_checked(import_object(self.generator.generate), count, seed=seed, split=split,
                            keys_of=self.task_keys, tests=tests, exclude=exclude, ceiling=ceiling, name=self.name,
                            bundled_ids={t.id for t in self.bundled_tasks()}, where=self.generator.generate,
                            progress=progress)

    def generator_templates(self) -> tuple[str, ...]:
        """Every family the domain's generator produces (empty without a generator)."""
        if self.generator is None:
            return ()
        return tuple(import_object(self.generator.templates)())

    def detect_format(self, path: str | Path) -> str:
        """The name of the format of ``path``: a loader's name, else ``"native"``."""
        p = Path(path)
        for loader in self.loaders:
            if loader.detect(p):
                return loader.name
        return "native"

    def load_tasks(self, path: str | Path, *, format: str | None = None) -> LoadResult:
        """Read tasks from ``path`` in its detected (or the given) format, keeping going past bad items.

        Args:
            path: a task file or folder (native), or whatever a loader reads.
            format: ``"native"`` or a loader's name; None detects it.

        Returns:
            The tasks that converted and the problems of the items that did not.

        Raises:
            ConfigError: an unknown format name.
            TaskFileError: nothing at ``path`` can be read.
        """
        p = Path(path)
        chosen = format or self.detect_format(p)
        if chosen == "native":
            return collect_tasks(p, self.task_model)
        for loader in self.loaders:
            if loader.name == chosen:
                return loader.load(p)
        known = ", ".join(["native", *(lo.name for lo in self.loaders)])
        raise ConfigError(f"the {self.name} domain reads no format {chosen!r}; formats: {known}.")


@functools.cache
def _bundled_with_splits(folder: Path, model: type[TaskSpec],
                         family: Callable[[TaskSpec], str]) -> tuple[TaskSpec, ...]:
    from agentunit_gym.tasks.loader import load_suite  # the parse cache lives in the tasks layer

    return tuple(assign_splits(load_suite(folder, model), family))
