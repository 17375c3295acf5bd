"""Argument types and the option groups more than one command takes (``eval`` and ``judge``'s model settings)."""

from __future__ import annotations

import argparse
from typing import Any


def _number(text: str, cast: type[int] | type[float], expected: str) -> Any:
    """``cast(text)``, or the argparse error that says what was ``expected``."""
    try:
        return cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (``-n``, ``--runs``, ``--concurrency``, ``--max-steps``)."""
    value = int(_number(text, int, "a whole number"))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1] (``--trap-rate``)."""
    value = float(_number(text, float, "a number between 0 and 1"))
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (a share of episodes), got {value:g}")
    return value


def positive_float(text: str) -> float:
    """A number above 0 (``--request-timeout``, ``--turn-deadline``: seconds)."""
    value = float(_number(text, float, "a number of seconds"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value:g}")
    return value


MODEL_SETTINGS: dict[str, str] = {
    "temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens",
    "request_timeout": "request_timeout_s", "turn_deadline": "turn_deadline_s",
}
"""Option dest -> :class:`~agentunit_gym.eval.agents.model_client.OpenAIConfig` field, for the model settings."""


def add_model_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The sampling and timing options of an ``openai:`` model (``eval``'s agent, ``judge``'s judge).

    ``prefix`` names the options of another model of the same command (``judge-``).
    """
    from agentunit_gym.eval.agents.model_client import DEFAULT_REQUEST_TIMEOUT_S, DEFAULT_TURN_DEADLINE_S

    who = "the judge" if prefix else "openai agents"
    p.add_argument(f"--{prefix}temperature", type=float, default=None, help=f"{who}: sampling temperature (default 0)")
    p.add_argument(f"--{prefix}top-p", type=fraction, default=None, help=f"{who}: nucleus sampling top_p (default: "
                   "the server's)")
    p.add_argument(f"--{prefix}max-tokens", type=positive_int, default=None,
                   help=f"{who}: completion tokens per turn at most (default 512; a reply cut there is recorded as "
                        "truncated)")
    p.add_argument(f"--{prefix}request-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help=f"{who}: deadline of one request (default {DEFAULT_REQUEST_TIMEOUT_S:g}). The retry after a "
                        "timeout starts the reply again while a local server may still be generating the abandoned "
                        "one: keep it above the time of one full reply")
    p.add_argument(f"--{prefix}turn-deadline", type=positive_float, default=None, metavar="SECONDS",
                   help=f"{who}: deadline of one turn, every retry included (default {DEFAULT_TURN_DEADLINE_S:g})")
    p.add_argument(f"--{prefix}model-arg", action="append", default=None, metavar="KEY=VALUE",
                   help=f"{who}: one more request body field, the value read as JSON when it parses "
                        "(seed=7, repeat_penalty=1.1, stop='[\"\\n\\n\"]'); repeatable")


def model_settings(args: argparse.Namespace, prefix: str = "") -> dict[str, Any]:
    """The model settings given on the command line, as :class:`OpenAIConfig` fields (``extra_body``
    for ``--model-arg``); options not given are left out.

    Raises:
        ConfigError: a ``--model-arg`` that is not KEY=VALUE.
    """
    from agentunit_gym.eval.agents.model_client import parse_model_args

    dest = prefix.replace("-", "_")
    settings = {field: getattr(args, dest + name) for name, field in MODEL_SETTINGS.items()
                if getattr(args, dest + name, None) is not None}
    extra = getattr(args, dest + "model_arg", None)
    if extra:
        settings["extra_body"] = parse_model_args(extra)
    return settings


def add_protocol_options(parser: argparse.ArgumentParser, *, served_stack: bool = False) -> None:
    """``--protocol`` and ``--agentbench-root`` of a command that serves envs (``serve``, ``mcp``):
    the same switch as ``eval --protocol`` (``make_eval_env(protocol=...)``).

    Args:
        served_stack: the command serves the bare env without ``--protocol`` (``serve``), and the
            evaluator's stack under that protocol with it; the help says so.
    """
    from pathlib import Path

    from agentunit_gym.wrappers.protocols import PROTOCOLS

    stack = (" With it, each session plays the evaluator's env stack (make_eval_env) under the protocol, as "
             "`eval --protocol` does; without it, the bare env." if served_stack else "")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=None,
                        help="agentunit (default) | agentbench: AgentBench's settings at once (an invalid reply ends "
                             "the episode, the domain's AgentBench turn limit, its observation caps) | "
                             "agentbench-fc: the same with AgentBench FC's tool names." + stack)
    parser.add_argument("--agentbench-root", type=Path, default=None, metavar="DIR",
                        help="an AgentBench checkout (v0.2, the text protocol): under --protocol agentbench each "
                             "episode opens with AgentBench's own instructions and one-shot, read from it")


def protocol_root(args: argparse.Namespace) -> str | None:
    """``--agentbench-root`` as an absolute path, None when not given.

    Raises:
        ConfigError: ``--agentbench-root`` without ``--protocol agentbench``.
    """
    from agentunit_gym.errors import ConfigError

    if args.agentbench_root is None:
        return None
    if args.protocol != "agentbench":
        raise ConfigError("--agentbench-root gives AgentBench's prompts to --protocol agentbench; add that "
                          f"protocol or drop the option (the protocol given: {args.protocol or 'agentunit'}).")
    return str(args.agentbench_root.resolve())


__all__ = ["MODEL_SETTINGS", "add_model_options", "add_protocol_options", "fraction", "model_settings",
           "positive_float", "positive_int", "protocol_root"]
