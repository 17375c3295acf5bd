"""Typed errors of agentunit-gym: one root, a flat set of subclasses.

Agent mistakes (a malformed reply, a failing command, a SQL error) are never raised: they
become observations. These exceptions are for the caller's mistakes and for
infrastructure failures. Each message says what was expected, what was found and what to
do next.
"""

from __future__ import annotations

from collections.abc import Sequence


class AgentUnitError(Exception):
    """Root of every error raised by agentunit-gym."""


class ConfigError(AgentUnitError, ValueError):
    """An option passed to an env, wrapper, backend or command is not valid."""


class AgentBenchCheckoutError(ConfigError):
    """The AgentBench checkout given (``--agentbench-root``) is not one, or its task modules are
    not laid out as the release agentunit-gym reads its prompts from (v0.2, the text protocol)."""


class MissingDependencyError(ConfigError, ImportError):
    """An optional dependency is not installed; the message gives the pip line.

    A :class:`ConfigError` (the fix is the user's: install the extra; the CLI exits 2 with the
    message) and an ``ImportError`` (what the missing import was).

    Attributes:
        package: the distribution that is missing (``docker``, ``pyarrow`` ...).
        extra: the agentunit-gym extra that brings it (``pip install "agentunit-gym[EXTRA]"``).
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package {package!r}, which is not installed. "
            f'Install it with: pip install "agentunit-gym[{extra}]"'
        )
        self.package = package
        self.extra = extra


class DependencyVersionError(MissingDependencyError):
    """An optional dependency is installed, but not a version agentunit-gym can use.

    A :class:`MissingDependencyError` (what is missing is a working version); the message
    names what was found, the versions that work, and the pip line of the extra.

    Attributes:
        found: what is installed (``"openenv 0.11.0"``, ``"mcp 1.30.0"``).
    """

    def __init__(self, package: str, extra: str, purpose: str, *, found: str, works_with: str,
                 advice: str = "") -> None:
        ending = f"; {advice}" if advice else "."
        ConfigError.__init__(
            self, f"{purpose} needs {works_with}, but {found} is installed. "
                  f'Install a working version with: pip install "agentunit-gym[{extra}]"{ending}')
        self.package = package
        self.extra = extra
        self.found = found


class TaskFileError(AgentUnitError, ValueError):
    """A task file cannot be read or does not validate.

    Attributes:
        path: the file.
        message: what is wrong, without the location.
        task_id: the task inside the file, when known.
        field: the dotted field path that failed, when known.
    """

    def __init__(
        self, path: str, message: str, *, task_id: str | None = None, field: str | None = None
    ) -> None:
        where = path
        if task_id is not None:
            where += f", task {task_id!r}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.message = message
        self.task_id = task_id
        self.field = field


MAX_PROBLEMS_SHOWN = 10
"""How many of a :class:`NoTasksError`'s problems its message lists (the count of the rest follows)."""


class NoTasksError(TaskFileError):
    """No task loads from a task file or folder given to run (``eval --tasks``): it is not
    valid JSON or YAML, holds no item, or every item fails. The run stops before its first
    episode rather than running the bundled suite in its place.

    Attributes:
        paths: every such file or folder.
        problems: one line per problem (``FILE[, task ID][, field F]: reason``), of all of them.
    """

    def __init__(self, paths: list[str], problems: list[str]) -> None:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        lines = "".join(f"\n  {line}" for line in shown) + (f"\n  ... and {more} more" if more else "")
        what = "this path" if len(paths) == 1 else "these paths"
        super().__init__(
            paths[0] if len(paths) == 1 else ", ".join(paths),
            f"no task loads from {what}, so nothing runs (the bundled suite is not used in its place):"
            f"{lines}\nFix the file (`agentunit-gym tasks validate PATH` lists every problem), or leave it out.")
        self.paths = paths
        self.problems = problems


class TaskNotFoundError(AgentUnitError, KeyError):
    """A task id was asked for that the env's suite does not hold."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class EpisodeStateError(AgentUnitError, RuntimeError):
    """The env was used out of order: step before reset, step after the episode ended, or after close."""


class BackendUnavailableError(AgentUnitError, RuntimeError):
    """A daemon or server the backend needs cannot be reached (Docker, MySQL, ...)."""


class EndpointRequiredError(BackendUnavailableError, ConfigError):
    """The tasks need a server the user must name (a Freebase SPARQL endpoint), and none was given.

    Both a :class:`BackendUnavailableError` (no server to run on) and a :class:`ConfigError`
    (the fix is an option the user passes: the CLI exits 2 with the message)."""


class BackendError(AgentUnitError, RuntimeError):
    """The backend failed while in use: a container died, a connection dropped, a command of ours failed."""


class BackendTimeoutError(AgentUnitError, TimeoutError):
    """An infrastructure operation of ours did not finish before its deadline."""


class IsolationError(AgentUnitError, RuntimeError):
    """The local sandbox cannot isolate commands (no user namespaces, no bubblewrap) and no opt-in was given."""


class ImageBuildError(AgentUnitError, RuntimeError):
    """A Docker image could not be built or bootstrapped."""


class AgentContextLimitError(AgentUnitError):
    """The model's endpoint refused a turn because the conversation exceeds the model's context window.

    Not an infrastructure failure and not the agent crashing: the evaluator ends the episode
    with finish reason ``CONTEXT_LIMIT`` (AgentBench's CLE). Never retried, since the same
    conversation would overflow again.

    Attributes:
        model: the model the request was for.
        server_message: the server's own words (capped).
        status: the HTTP status of the refusal.
    """

    def __init__(self, model: str, server_message: str, status: int) -> None:
        super().__init__(
            f"model {model!r} refused the turn: the conversation exceeds its context window "
            f"(HTTP {status}: {server_message}). The episode ends as CLE; use a model with a longer "
            "context, a lower max_tokens, or fewer steps."
        )
        self.model = model
        self.server_message = server_message
        self.status = status


class DomainError(ConfigError):
    """A domain is unknown, or its package (a third party's, found through the
    ``agentunit_gym.domains`` entry points) fails to load or describes itself wrongly.

    Attributes:
        domain: the domain's (or entry point's) name.
    """

    def __init__(self, domain: str, message: str) -> None:
        super().__init__(message)
        self.domain = domain


class RunStoppedError(AgentUnitError, RuntimeError):
    """The evaluator stopped a run early: most of its episodes failed for one infrastructure
    reason (a model endpoint that went down, a daemon that stopped). The episodes finished so
    far are saved; fix the cause and resume the run."""


class EndpointDownError(RunStoppedError):
    """A model endpoint stopped answering during a run and did not come back while the
    evaluator probed it (a few probes with backoff, within a deadline). The run stops; the
    episodes that failed on it are recorded as ``endpoint_error`` and a ``--resume`` reruns
    them. The CLI exits with :data:`EXIT_ENDPOINT_DOWN`."""


EXIT_ENDPOINT_DOWN = 3
"""``agentunit-gym eval``'s exit code when the model endpoint went away mid-run."""


class EndpointError(AgentUnitError, ConnectionError):
    """A model endpoint does not work (unreachable, refuses the key): found by the one
    request sent before the first episode. The message names the URL and the error."""


class ServerBusyError(AgentUnitError, RuntimeError):
    """An env server has as many sessions as its ``--max-sessions`` allows; the new one is refused.

    The server answers HTTP 503 (a WebSocket handshake is refused with 503 too) with this
    message; a client retries later or connects to another server."""


class RemoteProtocolError(AgentUnitError, ValueError):
    """A request to the env server, or the server's answer, is not what the protocol expects
    (malformed JSON, an unknown field, an action over the size limit, an unknown message type).

    The server answers 4xx with the message; a client raises it when the server's reply is unreadable."""


class ResetOptionError(ConfigError):
    """``reset(options=...)`` got options the env cannot honour: a key it does not know (a typo
    would otherwise be ignored and the episode run on a random task), or options lost on the way
    (:class:`LostResetOptionsError`).

    Made from its message alone, as every error here, so it survives gymnasium's
    ``AsyncVectorEnv``, which sends a worker's error to the main process as its type and its
    message (``exctype(value)``); the attributes are then empty.

    Attributes:
        unknown: the keys that are not options.
        known: the keys ``reset`` accepts.
    """

    def __init__(self, message: object = "", *, unknown: Sequence[str] = (), known: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.unknown = list(unknown)
        self.known = known

    @classmethod
    def unknown_keys(cls, unknown: Sequence[str], known: tuple[str, ...]) -> ResetOptionError:
        """The error for option keys ``unknown``, naming the ``known`` ones."""
        return cls(
            f"reset(options=...) got unknown key(s) {', '.join(repr(k) for k in unknown)}; the known keys are "
            f"{', '.join(repr(k) for k in known)}. Pick a task with options={{'task_id': ...}} or "
            "options={'task': TaskSpec}, or pass no options for a task drawn by the env's seeded RNG.",
            unknown=unknown, known=known,
        )


class LostResetOptionsError(ResetOptionError):
    """A reset arrived without the options of the reset just before it, before any step: what
    gymnasium 1.4's ``AsyncVectorEnv(shared_memory=False)`` with next-step autoreset does to a
    copy whose last step ended its episode, on the first step after ``envs.reset(options=...)``.
    Raised instead of playing a task the caller did not ask for (docs/training.md, "Vector envs").
    """

    @classmethod
    def dropped(cls, lost: Sequence[str], task_id: str) -> LostResetOptionsError:
        """The error for a bare reset that came right after a reset with options ``lost``, which
        started ``task_id``."""
        return cls(
            f"reset() without seed or options arrived right after a reset with {', '.join(repr(k) for k in lost)} "
            f"started task {task_id!r}, before any step: gymnasium's AsyncVectorEnv(shared_memory=False) "
            "with next-step autoreset resets a copy whose last step ended its episode again, without your "
            "seed or options, so this copy would play a task you did not ask for. Make the vector env with "
            "autoreset_mode=gym.vector.AutoresetMode.SAME_STEP (or DISABLED), or use SyncVectorEnv. If this "
            "reset() is your own and you want a task drawn by the seeded RNG, pass a seed or options={}."
        )


class InterruptedEpisodeError(EpisodeStateError):
    """``step()`` on an env that was pickled or copied while an episode ran: the episode's
    backend state (the shell, the episode database, the shop session) does not travel with
    the copy, so the copy has no episode until its next ``reset()``."""


INFRA_ERRORS: tuple[type[AgentUnitError], ...] = (BackendError, BackendTimeoutError, BackendUnavailableError,
                                                  ServerBusyError)
"""The infrastructure's failures under an episode (a backend, an env server, the network), never
the agent's: the evaluator retries the episode, and a trainer integration reports the episode as
an error to mask, never as a reward (docs/training.md, "When something fails")."""
