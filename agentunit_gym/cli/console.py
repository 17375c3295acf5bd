"""The CLI's rich consoles: tables at full width when written to a file or a pipe.

On a terminal a table fits the terminal's width (rich folds or cuts what does not fit).
Written to a file or a pipe, rich would assume 80 columns and cut names such as
``AgentUnit/DB-v0`` to ``AgentUnit/DB-…``: there the console is wide enough for any table's
natural width instead, unless ``COLUMNS`` names a width (``COLUMNS=120 agentunit-gym eval ...
| less``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from rich.console import Console

UNBOUNDED_WIDTH = 10_000
"""The width of a console that writes to a file or pipe: tables take their natural width."""


def table_console(*, stderr: bool = False, file: TextIO | None = None, **options: Any) -> Console:
    """A console for tables: the terminal's width on a terminal, else no cut (``COLUMNS`` wins).

    Args:
        stderr: write to standard error (else standard output, or ``file``).
        file: where to write.
        **options: passed on to :class:`rich.console.Console` (``quiet``, ``highlight``...).
    """
    console = Console(stderr=stderr, file=file, **options)
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(stderr=stderr, file=file if file is not None else (sys.stderr if stderr else sys.stdout),
                   width=UNBOUNDED_WIDTH, **options)


class ItemProgress:
    """Progress of a long command counted in items: a rich bar on a terminal; written to a file
    or pipe, one line per ``every`` items (and the last), so a log shows the command is alive.

    Use as a context manager; call it with ``(done, total)`` (and a note) as items finish.
    """

    def __init__(self, description: str, *, every: int = 500, quiet: bool = False) -> None:
        self.description = description
        self.every = max(1, every)
        self.quiet = quiet
        self._console = Console(stderr=True, highlight=False, quiet=quiet)
        self._bar: Any = None
        self._task: Any = None
        self._next_line = self.every
        self._last_line: int | None = None
        self._started = 0.0

    def __enter__(self) -> ItemProgress:
        import time

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._started = time.monotonic()
        if self._console.is_terminal and not self.quiet:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[note]}"), console=self._console)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=None, note="")
        return self

    def __call__(self, done: int, total: int | None, note: str = "") -> None:
        import time

        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, note=note)
            return
        first, last = self._last_line is None, done == total and done != self._last_line
        if self.quiet or not (first or last or done >= self._next_line):
            return
        self._last_line = done
        while self._next_line <= done:
            self._next_line += self.every
        of = f"/{total}" if total is not None else ""
        elapsed = time.monotonic() - self._started
        print(f"{self.description}: {done}{of} ({elapsed:.0f} s){f'; {note}' if note else ''}",
              file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
