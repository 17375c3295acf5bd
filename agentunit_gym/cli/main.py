"""The ``agentunit-gym`` command: thin subcommands over the library."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any

from agentunit_gym.errors import AgentUnitError, ConfigError, TaskFileError, TaskNotFoundError

USAGE_ERROR = 2
"""Exit code of a user mistake (a bad option value, a missing file, an unknown id): one line, no traceback."""

USER_ERRORS: tuple[type[AgentUnitError], ...] = (ConfigError, TaskFileError, TaskNotFoundError)
"""Library errors that mean the user asked for something wrong (exit 2); other errors exit 1."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``agentunit-gym eval: error: ...``), exit 2."""

    def error(self, message: str) -> Any:  # argparse's signature says NoReturn; Any keeps mypy quiet
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

# Each module registers its subcommands with ``register(subparsers)``; the handler it sets
# as ``func`` returns the exit code.
COMMAND_MODULES = ("tasks", "images", "cleanup", "eval", "judge", "compare", "export", "mcp", "serve")


def build_parser() -> argparse.ArgumentParser:
    from agentunit_gym.version import __version__

    parser = OneLineParser(prog="agentunit-gym", description="Gymnasium environments for LLM agents.")
    parser.add_argument("--version", action="version", version=f"agentunit-gym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"agentunit_gym.cli.{name}_cmd").register(sub)
    _register_domain_commands(sub)
    return parser


def _register_domain_commands(sub: argparse._SubParsersAction[OneLineParser]) -> None:
    """Commands a domain brings (``Domain.cli``, e.g. ``agentunit-gym webshop serve``), so no
    domain is named here."""
    from agentunit_gym.core import registry
    from agentunit_gym.core.domain import import_object

    for domain in registry.domains():
        if domain.cli is not None:
            import_object(domain.cli)(sub)


class _OncePerMessage(logging.Filter):
    """Lets each distinct message through once: every env of a run picks its backend the
    same way, and the user needs to read which only once."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self._seen:
            return False
        self._seen.add(message)
        return True


def _show_library_notes() -> None:
    """Print the library's INFO lines (e.g. which backend ``auto`` picked) on stderr."""
    logger = logging.getLogger("agentunit_gym")
    if any(getattr(h, "_agentunit_cli", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("agentunit-gym: %(message)s"))
    handler.addFilter(_OncePerMessage())
    handler._agentunit_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    _show_library_notes()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        print(f"agentunit-gym: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except AgentUnitError as exc:
        print(f"agentunit-gym: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agentunit-gym: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
