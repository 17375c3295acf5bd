"""``agentunit-gym serve --env ENV``: an env behind an OpenEnv-compatible server (docs/serving.md)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from agentunit_gym.cli.arguments import add_protocol_options, protocol_root


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="serve an env over OpenEnv's HTTP/WebSocket API for rollout workers elsewhere",
        description="Serve ENV with OpenEnv's API (/ws sessions, /reset, /step, /state, /schema, /health, "
                    "/metadata): one fresh env copy per session from a warm pool, closed when the session ends "
                    "or idles past --idle-timeout; at most --max-sessions at once (one more waits --queue-timeout, "
                    "then gets 503). Loopback "
                    "only unless --token is given. Play a session with gym.make('AgentUnit/Remote-v0', url=...) "
                    "or OpenEnv's own client (docs/serving.md).")
    p.add_argument("--env", required=True, help="a registered env id (the short form, without the namespace, works)")
    p.add_argument("--backend", default=None, help="the env's backend (default: the env's own default)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 takes a free one)")
    p.add_argument("--max-sessions", type=int, default=16, help="most sessions at once (default 16)")
    p.add_argument("--queue-timeout", type=float, default=5.0, metavar="S",
                   help="a session request over --max-sessions waits this long for a free session, then gets "
                        "503 with Retry-After (default 5; 0 refuses at once)")
    p.add_argument("--token", default=None,
                   help="bearer token every request must carry (default: $AGENTUNIT_GYM_TOKEN, else none; "
                        "prefer the variable: a command line is visible to other users)")
    p.add_argument("--idle-timeout", type=float, default=300.0, metavar="S",
                   help="close a session idle this many seconds (default 300)")
    p.add_argument("--warm", type=int, default=2, help="env copies built ahead (default 2)")
    p.add_argument("--max-action-chars", type=int, default=262_144, help="longest reply a step takes")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="largest request or message")
    p.add_argument("--check-reset", action="store_true",
                   help="reset one env copy before listening: a backend that cannot run here (a sandbox that "
                        "cannot isolate) stops the server at start, not every session's first reset")
    p.add_argument("--env-kwargs", default=None, metavar="JSON",
                   help='more gym.make options as a JSON object, e.g. \'{"max_steps": 10}\'')
    add_protocol_options(p, served_stack=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agentunit_gym.errors import ConfigError
    from agentunit_gym.serve.server import TOKEN_ENV_VAR, ServeConfig, serve

    try:
        env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else {}
    except ValueError as exc:
        raise ConfigError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r} ({exc}).") from exc
    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"--env-kwargs must be a JSON object, got {type(env_kwargs).__name__}.")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV_VAR) or None
    try:
        config = ServeConfig(env=args.env, backend=args.backend, host=args.host, port=args.port,
                             max_sessions=args.max_sessions, queue_timeout_s=args.queue_timeout, token=token,
                             idle_timeout_s=args.idle_timeout,
                             warm=args.warm, max_action_chars=args.max_action_chars,
                             max_request_bytes=args.max_request_bytes, env_kwargs=env_kwargs,
                             check_reset=args.check_reset,
                             protocol=args.protocol, agentbench_root=protocol_root(args))
    except ValueError as exc:  # pydantic's ValidationError: a bound broken
        raise ConfigError(f"invalid serve option: {exc}") from exc

    def ready(url: str) -> None:
        auth = "bearer token required" if token else "no token"
        print(f"agentunit-gym serve: {config.env} on {url} (max {config.max_sessions} sessions, {auth}); "
              "Ctrl-C stops", flush=True)

    serve(config, on_ready=ready)
    return 0

