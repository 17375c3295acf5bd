"""``agentunit-gym mcp --env ENV``: an env's tools behind an MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from agentunit_gym.cli.arguments import add_protocol_options, protocol_root


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mcp", help="serve an env's tools to MCP clients, one episode per MCP session (needs agentunit-gym[mcp])",
        description="An MCP server on the official SDK: the env's tools as MCP tools, the task as the resource "
                    "agentunit://task and the prompt 'task', the score in the result of the call that ends the "
                    "episode. One episode per MCP session; --output records them as `agentunit-gym eval` does "
                    "(docs/serving.md, \"MCP server\").")
    p.add_argument("--env", required=True, help="a registered env id (the short form, without the namespace, works)")
    p.add_argument("--backend", default="auto", help="the env's backend (default auto: the env picks)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default: one client, the process that started this one) or http (streamable HTTP)")
    p.add_argument("--host", default="127.0.0.1",
                   help=f"http: address to listen on (default loopback; another needs a token in ${{{_token_env()}}})")
    p.add_argument("--port", type=int, default=8765, help="http: port (default 8765; 0 picks a free one)")
    p.add_argument("--output", type=Path, default=None,
                   help="record every episode in this run folder (episodes.jsonl, traces/), readable by export")
    p.add_argument("--task-id", default=None, help="the task every episode plays (default: one the seed picks)")
    p.add_argument("--seed", type=int, default=None,
                   help="reset seed of the first episode, the n-th uses seed+n (default: random, recorded)")
    p.add_argument("--max-sessions", type=int, default=16, help="http: episodes running at once (default 16)")
    p.add_argument("--idle-timeout", type=float, default=1800.0,
                   help="http: end an episode whose session was silent this many seconds (default 1800)")
    p.add_argument("--full-text", action="store_true", help="record whole texts in traces (not capped at 4000)")
    add_protocol_options(p)
    p.set_defaults(func=run)


def _token_env() -> str:
    from agentunit_gym.serve.mcp_server import TOKEN_ENV

    return TOKEN_ENV


def run(args: argparse.Namespace) -> int:
    from agentunit_gym.errors import ConfigError
    from agentunit_gym.serve.mcp_server import McpEpisodeServer, check_binding
    from agentunit_gym.serve.served_episodes import EpisodePool, EpisodeSettings

    if args.transport == "http" and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be in 0-65535, got {args.port}.")
    token = os.environ.get(_token_env()) or None
    if args.transport == "http":
        check_binding(args.host, token)  # before the env starts: a refusal costs nothing
    settings = EpisodeSettings(env_id=args.env, backend=args.backend, task_id=args.task_id, seed=args.seed,
                               output=args.output, full_text=args.full_text, protocol=args.protocol or "agentunit",
                               agentbench_root=protocol_root(args))
    # stdio has one session, which ends with the pipe: no idle limit there.
    idle = args.idle_timeout if args.transport == "http" and args.idle_timeout > 0 else None
    pool = EpisodePool(settings, max_sessions=args.max_sessions, idle_timeout_s=idle)
    try:
        server = McpEpisodeServer(pool, transport=args.transport)
    except BaseException:
        pool.close()
        raise
    if args.transport == "stdio":
        server.serve_stdio()
        return 0

    def ready(url: str) -> None:
        auth = " (bearer token required)" if token else ""
        print(f"agentunit-gym mcp: serving {pool.env_id} at {url}{auth}", file=sys.stderr, flush=True)

    server.serve_http(args.host, args.port, token=token, ready=ready)
    return 0
