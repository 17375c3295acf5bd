"""An env's hold on its backend: open, reopen after a pickle, close only what it owns.

Every domain env runs on one backend object (a sandbox, a SQL server, a SPARQL store, a
shop). Either the env opened it, and then it owns it: it closes it, and a pickled or copied
env opens its own in the process it lands in, on first use. Or the caller passed one in
(``sandbox=``, ``sql_backend=`` ...), and then the env never closes it and refuses to be
pickled, since it cannot open that object elsewhere. :class:`BackendHandle` is that rule,
once. The env holds it as an attribute; :class:`~agentunit_gym.core.env.AgentEnv` closes
every handle it holds in ``close()``, starts them in ``warm_up()``, and pickles them as
:meth:`BackendHandle.travelling` gives them.

Example:

    >>> from functools import partial
    >>> from agentunit_gym.backends.sql.factory import open_sql_backend
    >>> handle = BackendHandle.owned(open_sql_backend("sqlite"), reopen=partial(open_sql_backend, "sqlite"))
    >>> handle.kind, handle.is_open
    ('sqlite', True)
    >>> copy = handle.travelling()          # what a pickle carries: no live backend
    >>> copy.is_open, copy.get().kind, copy.is_open
    (False, 'sqlite', True)
    >>> copy.close(); handle.close()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from agentunit_gym.errors import ConfigError, EpisodeStateError


class Backend(Protocol):
    """What a handle needs of a backend: its kind and a close."""

    @property
    def kind(self) -> str:
        """The backend implementation (``docker``, ``sqlite`` ...), as ``env.backend_name`` shows it."""
        ...

    def close(self) -> None:
        """Release what the backend holds."""
        ...


B = TypeVar("B", bound=Backend)


class BackendHandle(Generic[B]):
    """One backend of an env, owned or borrowed (see the module).

    Make it with :meth:`owned` or :meth:`borrowed`.

    Args:
        backend: the open backend.
        reopen: opens an equal backend in another process (a module-level function or a
            ``functools.partial`` of one, so it pickles); None for a borrowed backend.
        refusal: for a borrowed backend, why the env cannot travel and what to do instead.
        warm: starts the backend ahead of the first episode (e.g. ``operator.methodcaller("start")``
            for a sandbox), called by :meth:`warm` while the backend is pristine; None: opening is all.
    """

    def __init__(self, backend: B, *, reopen: Callable[[], B] | None, refusal: str = "",
                 warm: Callable[[B], Any] | None = None) -> None:
        self._live: B | None = backend
        self._reopen = reopen
        self.kind = backend.kind
        """The backend's kind, resolved (never ``auto``): a copy reopens the same kind."""
        self.refusal = refusal
        self._warm = warm
        self.pristine = reopen is not None
        """The backend ran nothing since this handle opened it (the env may skip its first
        reset); False for a borrowed one, which the caller may have used. The env clears it."""
        self.closed = False

    @classmethod
    def owned(cls, backend: B, *, reopen: Callable[[], B], warm: Callable[[B], Any] | None = None) -> BackendHandle[B]:
        """A backend the env opened: closed with the env, reopened by ``reopen`` in a copy."""
        return cls(backend, reopen=reopen, warm=warm)

    @classmethod
    def borrowed(cls, backend: B, *, refusal: str) -> BackendHandle[B]:
        """A backend the caller passed in: never closed by the env; the env refuses to travel,
        and ``refusal`` says why and what to do instead."""
        return cls(backend, reopen=None, refusal=refusal)

    @property
    def owns(self) -> bool:
        """Whether the env opened the backend (and so closes it and can reopen it)."""
        return self._reopen is not None

    @property
    def is_open(self) -> bool:
        """Whether a live backend is held here (False in a copy before its first use, and once closed)."""
        return self._live is not None

    @property
    def live(self) -> B | None:
        """The backend when one is open here, without opening one."""
        return self._live

    def get(self) -> B:
        """The backend; a copy that travelled opens its own here, on first use.

        Raises:
            EpisodeStateError: the handle is closed.
            BackendUnavailableError: reopening failed.
        """
        if self._live is None and self._reopen is not None and not self.closed:
            self._live = self._reopen()
            self.pristine = True
        if self._live is None:
            raise EpisodeStateError("the env is closed: make a new env.")
        return self._live

    def warm(self) -> None:
        """Open the backend and start it now, while pristine (idempotent)."""
        backend = self.get()
        if self.pristine and self._warm is not None:
            self._warm(backend)

    def close(self) -> None:
        """Let go of the backend: close it when owned. Idempotent."""
        backend, self._live = self._live, None
        self.closed = True
        if backend is not None and self.owns:
            backend.close()

    def travelling(self) -> BackendHandle[B]:
        """The handle a pickle or copy of the env carries: no live backend (the copy reopens its own).

        Raises:
            ConfigError: the backend is borrowed, so a copy could not open its own.
        """
        if not self.owns:
            raise ConfigError(f"this env cannot be pickled or copied: {self.refusal}")
        copy: BackendHandle[B] = object.__new__(BackendHandle)
        copy.__dict__.update(self.__dict__, _live=None)
        return copy

    @staticmethod
    def held_by(owner: object) -> list[BackendHandle[Any]]:
        """The handles ``owner`` (an env) holds: its attributes that are one."""
        return [value for value in vars(owner).values() if isinstance(value, BackendHandle)]

    def __getstate__(self) -> dict[str, Any]:
        """A pickled handle is a travelling one (see :meth:`travelling`)."""
        return dict(self.travelling().__dict__)
