"""The sandbox interface the OS env uses; ``docker`` and ``local`` implement it.

A sandbox is one isolated Linux user space for one env. It runs one-off commands (task
init scripts, checks), keeps one persistent bash for the agent (cwd, variables and
background jobs persist between steps), reads and writes files, and resets to its
pristine state between episodes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

TRUNCATION_MARKER = "\n[output truncated: {shown} of {total} bytes shown]"

Language = Literal["bash", "python"]

AGENT_CAPABILITIES: tuple[str, ...] = (
    "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL", "AUDIT_WRITE", "NET_BIND_SERVICE",
)
"""What the agent (root in its sandbox) may do beyond a plain user, on every backend: file
ownership and permission tasks, users and ``su``, signalling its own processes, low ports.
Not mounting, not changing the network, the hostname or the clock (a subset of Docker's defaults)."""


@dataclass(frozen=True)
class ExecResult:
    """What a command produced.

    ``output`` is stdout and stderr interleaved as the command wrote them, decoded as UTF-8
    with replacement, at most ``max_output`` bytes of it (then ``truncated`` is set and the
    rest was drained and discarded). ``exit_code`` is None when the command timed out.
    """

    output: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    """How many bytes the command wrote in all, shown or not."""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Sandbox(ABC):
    """One isolated environment for one OS env.

    Implementations: :class:`~agentunit_gym.backends.sandbox.docker.DockerSandbox`,
    :class:`~agentunit_gym.backends.sandbox.local.LocalSandbox`. All methods that wait
    have a deadline; infrastructure failures raise ``BackendError`` (a dead container),
    ``BackendUnavailableError`` (no daemon) or ``BackendTimeoutError``.
    """

    kind: ClassVar[str]
    """The kind's name (``docker``, ``local``, a third party's: :mod:`~agentunit_gym.backends.sandbox.kinds`):
    the OS env's ``backend=``, and the name tasks list in ``backends``."""

    @property
    def multi_user(self) -> bool:
        """Whether processes can switch users here (``su jack``, ``chown jack f``): tasks that
        declare ``needs_users`` run only then. True for docker; the local sandbox says per
        caller (docs/sandbox-local.md)."""
        return True

    @property
    def limits_off(self) -> dict[str, str]:
        """The resource limits (``memory``, ``cpu``, ``pids``, ``disk``) this sandbox cannot
        enforce on this host, each with the reason; empty when all apply (docker always).
        The OS env reports them in ``info["backend_limits_off"]``."""
        return {}

    @abstractmethod
    def start(self) -> None:
        """Bring the sandbox up (idempotent). ``run``/``shell`` call it when needed."""

    @abstractmethod
    def run(self, command: str, *, timeout: float = 30.0, language: Language = "bash",
            args: tuple[str, ...] = (), max_output: int = 1 << 20) -> ExecResult:
        """Run a one-off command as root, outside the agent's shell (init scripts, checks).

        ``args`` are passed as positional parameters (``$1``... for bash, ``sys.argv[1:]``
        for python).
        """

    @abstractmethod
    def shell(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """Run ``command`` in the agent's persistent bash. On timeout the command's process
        group is killed, the result says ``timed_out`` and the shell stays usable."""

    def shell_setup(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        """Run the task's own setup command (its start script) in the agent's persistent bash.

        As :meth:`shell`, except that what it leaves running is the task's: it is not watched
        for a flood of processes (the watch lasts until nothing new appeared for
        ``RUNAWAY_STILL_S``, 150 ms, for every command that leaves a background process),
        as a one-off command (:meth:`run`) is not. Never for the agent's commands. This
        default is :meth:`shell`."""
        return self.shell(command, timeout=timeout, max_output=max_output)

    @abstractmethod
    def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> bytes:
        """The content of a file inside the sandbox. Raises FileNotFoundError if absent."""

    @abstractmethod
    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file inside the sandbox (parents are created)."""

    @abstractmethod
    def reset(self) -> None:
        """Return to the pristine state: kill agent processes, restore files, new shell.
        When pristine state cannot be proven, recreate the sandbox."""

    @abstractmethod
    def close(self) -> None:
        """Release everything (container, processes, temp dirs). Idempotent."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
