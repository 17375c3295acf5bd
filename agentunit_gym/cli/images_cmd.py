"""``agentunit-gym images``: build, bootstrap and list the project's Docker images."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``images`` command and its subcommands."""
    parser = subparsers.add_parser("images", help="build, bootstrap and list the Docker images")
    sub = parser.add_subparsers(dest="images_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: _help(parser))

    build = sub.add_parser("build", help="build images that are missing or stale (default: all)")
    build.add_argument("names", nargs="*", metavar="NAME", help="image names (os, mariadb, ...)")
    build.add_argument("--rebuild", action="store_true", help="build even when the current tag exists")
    build.set_defaults(func=cmd_build)

    boot = sub.add_parser("bootstrap", help="create the base image from Debian packages (debootstrap)")
    boot.add_argument("--mirror", default=None, help="Debian mirror (default: http://deb.debian.org/debian)")
    boot.set_defaults(func=cmd_bootstrap)

    listing = sub.add_parser("list", help="list our images on the daemon and whether they are current")
    listing.set_defaults(func=cmd_list)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_build(args: argparse.Namespace) -> int:
    """Ensure (or rebuild) each named image, showing the build's last output line."""
    from rich.console import Console

    from agentunit_gym.backends.images import available_images, ensure_image

    console = Console(stderr=True)
    names = args.names or available_images()
    for name in names:
        with console.status(f"[bold]{name}[/]: checking") as status:
            def progress(line: str, name: str = name) -> None:
                status.update(f"[bold]{name}[/]: {line[:100]}")

            tag = ensure_image(name, progress=progress, rebuild=args.rebuild)
        console.print(f"[green]ok[/] {name}: {tag}")
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    """Create ``agentunit-gym/base:bookworm`` with debootstrap."""
    from rich.console import Console

    from agentunit_gym.backends.images import DEBIAN_MIRROR, bootstrap_base

    console = Console(stderr=True)
    with console.status("bootstrapping the base image") as status:
        tag = bootstrap_base(progress=lambda line: status.update(line[:100]), mirror=args.mirror or DEBIAN_MIRROR)
    console.print(f"[green]ok[/] base image: {tag}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Print a table of our images."""
    from rich.table import Table

    from agentunit_gym.backends.images import list_images
    from agentunit_gym.cli.console import table_console

    table = Table(title="agentunit-gym images")
    for column in ("name", "tag", "id", "size", "base", "state"):
        table.add_column(column)
    for image in list_images():
        tags = ", ".join(t.rpartition(":")[2] for t in image.tags) or "<none>"
        table.add_row(image.name, tags, image.id.removeprefix("sha256:")[:12],
                      f"{image.size_bytes / 1e6:.0f} MB", image.base or "-",
                      "[green]current[/]" if image.current else "[yellow]stale or other[/]")
    table_console().print(table)
    return 0
