"""``agentunit-gym export RUN_DIR --output FILE``: a finished run's episodes as chat trajectories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export", help="write a run's episodes as chat trajectories (JSON Lines or Parquet) for trainers",
        description="One row per finished episode of RUN_DIR: the conversation as OpenAI chat messages (built as "
                    "the built-in OpenAI agent builds it), per-step rewards, the reward and score, task and env "
                    "ids, split, backend, finish reason and seed; columns named for SkyRL's and verl's dataset loaders "
                    "(docs/training.md).")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run folder (results/<run>)")
    p.add_argument("--output", "-o", type=Path, required=True, help="the file to write")
    p.add_argument("--format", choices=["jsonl", "parquet"], default=None,
                   help="default: parquet for a .parquet output, else jsonl (parquet needs agentunit-gym[export])")
    p.add_argument("--style", choices=["react", "tools"], default=None,
                   help="how replies become messages (default: the run's openai agent's mode; for other agents, "
                        "tools when an episode's replies are JSON tool calls, else react)")
    p.add_argument("--agent-name", default=None, metavar="NAME",
                   help="the verl agent loop named in each row's agent_name column (default: tool_agent, "
                        "verl's ToolAgentLoop)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agentunit_gym.eval.record.export import export_run
    from agentunit_gym.eval.record.trainer_columns import VERL_AGENT_NAME

    result = export_run(args.run_dir, args.output, fmt=args.format, style=args.style,
                        agent_name=args.agent_name or VERL_AGENT_NAME)
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(result.skipped.items()))
    print(f"agentunit-gym export: {result.rows} episode(s) written to {result.path}"
          + (f"; not exported: {skipped}" if skipped else ""))
    if result.truncated:
        print(f"agentunit-gym export: warning: {result.truncated} of {result.rows} episode(s) have text cut at the "
              "trace cap (their rows have text_truncated = true, their messages are not what the agent read in "
              "full); run the eval with --full-text to record whole texts.", file=sys.stderr)
    return 0
