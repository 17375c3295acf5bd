"""The standard check helpers of OS tasks, one file each, in one table.

Each helper compares the agent's answer (``argv[1]``) with the previous pipeline output,
usually the reference output (``argv[2]``), and exits 0 when they agree. A task names one
as ``{builtin: integer-match}``. The same file serves twice: the env imports its
``matches`` function and evaluates a built-in step without starting a process (~20 ms a
step on docker), and the file's source is what a sandbox runs when the script itself is
asked for (``Script.source``), so the two cannot disagree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

_HERE = Path(__file__).parent


@dataclass(frozen=True)
class CheckHelper:
    """One built-in check helper."""

    name: str
    """The name task files use (``integer-match``)."""
    module: str
    """The module file in this folder (``integer_match``)."""

    @property
    def path(self) -> Path:
        return _HERE / f"{self.module}.py"

    @cached_property
    def source(self) -> str:
        """The python script a sandbox runs."""
        return self.path.read_text(encoding="utf-8")

    @cached_property
    def matches(self) -> Callable[[str, str], bool]:
        """``(answer, reference) -> passed``, the same code the script runs."""
        func: Callable[[str, str], bool] = importlib.import_module(f"{__name__}.{self.module}").matches
        return func


CHECK_HELPERS: dict[str, CheckHelper] = {
    h.name: h
    for h in (
        CheckHelper("integer-match", "integer_match"),
        CheckHelper("string-match", "string_match"),
        CheckHelper("size-match", "size_match"),
        CheckHelper("contains", "contains"),
    )
}
"""Every built-in check helper, by the name task files use."""
