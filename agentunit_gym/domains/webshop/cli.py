"""The WebShop domain's commands: ``agentunit-gym webshop serve`` (the CLI finds ``register`` here)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agentunit_gym.domains.webshop.serve import open_play_server


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``webshop`` command group (found by the CLI in this domain package)."""
    group = sub.add_parser("webshop", help="the WebShop domain's shop, for people")
    commands = group.add_subparsers(dest="webshop_command", metavar="SUBCOMMAND")
    serve = commands.add_parser("serve", help="serve the shop on a loopback port and print a goal's URL")
    serve.add_argument("--goal", default=None, help="a bundled goal id (default: a page listing them)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="default: a free port")
    serve.set_defaults(func=_serve)
    group.set_defaults(func=lambda args: _help(group))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _serve(args: argparse.Namespace, *, wait: Callable[[], None] | None = None) -> int:
    server, url = open_play_server(args.goal, host=args.host, port=args.port)
    print(f"WebShop: open {url}  (Ctrl-C stops the server)", flush=True)
    try:
        if wait is not None:
            wait()
        else:
            server.serve_until_interrupted()
    finally:
        server.close()
    return 0
