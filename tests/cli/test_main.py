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
    assert set(sub.choices) == {"tasks", "images", "cleanup", "eval", "judge", "compare"}
