"""The command table lists only commands that exist."""

from __future__ import annotations

import argparse
import importlib

from agentunit_gym.cli.main import COMMAND_MODULES, build_parser


def test_every_listed_command_has_a_module_and_appears_in_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMAND_MODULES:
        assert callable(importlib.import_module(f"agentunit_gym.cli.{name}_cmd").register)
    # Besides the package's own commands, a domain package may bring some through its ``cli``
    # module's ``register`` (found by the registry, named nowhere here).
    from agentunit_gym.core.registry import domains

    brought = set()
    for domain in domains():
        package = domain.task_model.__module__.rpartition(".")[0]
        try:
            module = importlib.import_module(f"{package}.cli")
        except ModuleNotFoundError:
            continue
        probe = argparse.ArgumentParser().add_subparsers()
        module.register(probe)
        brought |= set(probe.choices)
    commands = {"tasks", "images", "cleanup", "eval", "judge", "compare", "export", "mcp", "serve"}
    assert set(sub.choices) == commands | brought
