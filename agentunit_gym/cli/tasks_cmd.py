"""``agentunit-gym tasks``: list, show, validate task files and export their JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from agentunit_gym.core.domain import Domain, LoadResult
from agentunit_gym.core.registry import broken_domains, domain_names, domains, find_task, get_domain
from agentunit_gym.errors import ConfigError, TaskFileError


def register(subparsers: Any) -> None:
    """Add the ``tasks`` command and its subcommands."""
    parser = subparsers.add_parser("tasks", help="list, show, validate task files; export their schema")
    sub = parser.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: _help(parser))

    listing = sub.add_parser("list", help="list the bundled tasks")
    listing.add_argument("--domain", help=f"only this domain ({', '.join(domain_names())})")
    listing.add_argument("--category", help="only this category")
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print one bundled task as YAML")
    show.add_argument("task_id")
    show.add_argument("--domain", help="look only in this domain")
    show.set_defaults(func=cmd_show)

    names = domain_names()
    default = names[0] if names else None
    validate = sub.add_parser("validate", help="validate task files or folders (native or a domain's foreign format)")
    validate.add_argument("paths", nargs="+", metavar="PATH")
    validate.add_argument("--domain", default=None,
                          help="task model to validate against (default: the domain whose model fits the files best)")
    validate.add_argument("--format", default=None, help="native, or a loader of the domain (default: detected)")
    validate.set_defaults(func=cmd_validate)

    schema = sub.add_parser("schema", help="print the JSON Schema of a domain's task files")
    schema.add_argument("--domain", default=default, help=f"default: {default}")
    schema.set_defaults(func=cmd_schema)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_list(args: argparse.Namespace) -> int:
    """Print a table of bundled tasks, filtered by domain and category."""
    from rich.console import Console
    from rich.table import Table

    chosen = [get_domain(args.domain)] if args.domain else domains()
    table = Table(title="Bundled tasks")
    table.add_column("id", no_wrap=True)
    table.add_column("domain")
    table.add_column("category")
    table.add_column("backends")
    table.add_column("steps", justify="right")
    table.add_column("instruction", overflow="ellipsis", no_wrap=True, max_width=60)
    count = 0
    for domain in chosen:
        for task in domain.bundled_tasks():
            if args.category and task.category != args.category:
                continue
            table.add_row(task.id, domain.name, task.category, ",".join(task.backends) if task.backends else "all",
                          str(task.k_opt), task.instruction)
            count += 1
    console = Console(file=sys.stdout)
    if not console.is_terminal:
        # Piped or captured output has no width; do not squeeze the columns into 80.
        console = Console(file=sys.stdout, width=200)
    console.print(table)
    console.print(f"{count} task(s)")
    for broken in broken_domains():
        print(f"warning: domain {broken.name!r} was skipped: {broken.reason}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one task as YAML."""
    domain, task = find_task(args.task_id, args.domain)
    data = task.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
    print(f"# domain: {domain.name}")
    print(yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100), end="")
    return 0


# A SafeDumper that writes multi-line strings (scripts) as ``|`` blocks, as task files do.
_BlockDumper: Any = type("_BlockDumper", (yaml.SafeDumper,), {})


def _represent_str(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate each path; exit 1 naming file, task and field of every problem found."""
    failed = 0
    for path in args.paths:
        try:
            domain, result = _load_any(path, args.domain, args.format)
        except TaskFileError as exc:
            failed += 1
            print(f"invalid: {exc}", file=sys.stderr)
            continue
        for problem in result.problems:
            print(f"invalid: {problem}", file=sys.stderr)
        if result.problems:
            failed += 1
            print(f"{path}: {len(result.tasks)} task(s) valid, {len(result.problems)} problem(s)")
        else:
            print(f"ok: {path} ({len(result.tasks)} task(s)) [{domain.name}]")
    return 1 if failed else 0


def _load_any(path: str, name: str | None, fmt: str | None) -> tuple[Domain, LoadResult]:
    """Load ``path`` with the named domain, or with the domain that reads it best.

    Without a name, every domain reads the path; a domain with no problems wins, else the one
    that converted the most tasks (the first registered on a tie), so its problems are shown.
    """
    if name is not None:
        domain = get_domain(name)
        return domain, domain.load_tasks(path, format=fmt)
    best: tuple[Domain, LoadResult] | None = None
    error: TaskFileError | None = None
    for domain in domains():
        try:
            result = domain.load_tasks(path, format=fmt)
        except (TaskFileError, ConfigError) as exc:
            if isinstance(exc, TaskFileError):
                error = error or exc
            continue
        if not result.problems and result.tasks:
            return domain, result
        if best is None or len(result.tasks) > len(best[1].tasks):
            best = (domain, result)
    if best is None:
        raise error or TaskFileError(path, "no domain reads this path; pass --domain.")
    return best


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the domain's task model."""
    print(json.dumps(get_domain(args.domain).task_model.model_json_schema(), indent=2))
    return 0
