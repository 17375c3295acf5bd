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
