"""``agentunit-gym tasks``: list, show, validate, check, generate and compare task files; export their JSON Schema."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from agentunit_gym.cli.eval_cmd import backend_choices, backend_help
from agentunit_gym.core.domain import Domain
from agentunit_gym.core.generation import domain_for_env, generator_env_ids, task_items, write_generated
from agentunit_gym.core.registry import broken_domains, domain_names, domains, env_ids, find_task, get_domain
from agentunit_gym.core.task_sets import SPEC_HELP, load_task_set, overlap_of
from agentunit_gym.core.task_sources import TaskSource, load_path, load_sources
from agentunit_gym.errors import ConfigError, TaskFileError, TaskNotFoundError
from agentunit_gym.tasks.spec import TaskSpec
from agentunit_gym.tasks.splits import SPLITS, filter_split

_TASKS_HELP = ("task file or folder instead of the bundled suites: native YAML/JSON, or AgentBench's data "
               "(format and domain detected); repeatable")


def register(subparsers: Any) -> None:
    """Add the ``tasks`` command and its subcommands."""
    parser = subparsers.add_parser("tasks", help="list, show, validate task files; export their schema")
    sub = parser.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    parser.set_defaults(func=lambda args: _help(parser))

    listing = sub.add_parser("list", help="list the bundled tasks (or those of --tasks)")
    listing.add_argument("--domain", help=f"only this domain ({', '.join(domain_names())})")
    listing.add_argument("--category", help="only this category")
    listing.add_argument("--env", help=f"only this env's domain ({', '.join(env_ids()) or 'none registered'}; "
                                       "short ids work)")
    listing.add_argument("--split", choices=SPLITS, help="only the tasks of this split (docs/tasks.md, \"Splits\")")
    listing.add_argument("--json", action="store_true", help="print a JSON list of task objects instead of a table")
    listing.add_argument("--tasks", action="append", metavar="PATH", help=_TASKS_HELP)
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="print one task as YAML (bundled, or from --tasks)")
    show.add_argument("task_id")
    show.add_argument("--domain", help="look only in this domain")
    show.add_argument("--tasks", action="append", metavar="PATH", help=_TASKS_HELP)
    show.set_defaults(func=cmd_show)

    names = domain_names()
    default = names[0] if names else None
    validate = sub.add_parser("validate", help="validate task files or folders (native or a domain's foreign format); "
                                               "lists every item that does not convert (file, line or item, reason)")
    validate.add_argument("paths", nargs="*", metavar="PATH")
    validate.add_argument("--tasks", action="append", metavar="PATH", help="the same as a PATH argument")
    validate.add_argument("--domain", default=None,
                          help="task model to validate against (default: the domain whose model fits the files best)")
    validate.add_argument("--format", default=None, help="native, or a loader of the domain (default: detected)")
    validate.set_defaults(func=cmd_validate)

    check = sub.add_parser("check", help="per task file: how many items load, run and pass with the oracle agent, "
                                         "and why the rest do not; exit 0 when all pass, 1 otherwise")
    check.add_argument("paths", nargs="+", metavar="PATH", help="task files or folders (native or AgentBench's data)")
    check.add_argument("--backend", action="append", dest="backends", choices=backend_choices(), metavar="BACKEND",
                       help=f"backend: {backend_help()}; repeatable, one per domain (default: auto)")
    check.add_argument("--output", default=None, metavar="DIR",
                       help="keep the oracle run (episodes.jsonl, traces, report) here; default: a temporary folder")
    check.add_argument("--concurrency", type=int, default=4, help="episodes in flight per env (default 4)")
    check.add_argument("--network", action="store_true",
                       help="run with the network (as eval --network); without it, items that need the network "
                            "are listed as not run")
    check.add_argument("--env-option", dest="env_option", action="append", default=None, metavar="[ENV:]KEY=VALUE",
                       help="an env keyword argument, as eval --env-option (the KG endpoint AgentBench's Freebase "
                            "items need, a shop url); without the endpoint those items are listed as not run")
    check.add_argument("--json", action="store_true", help="print the counts and reasons as JSON")
    check.add_argument("--progress-every", type=int, default=100, metavar="N",
                       help="written to a file or pipe: a progress line per N episodes (default 100)")
    check.set_defaults(func=cmd_check)

    generate = sub.add_parser("generate", help="write a generated task set (seeded, namespaced ids, reference "
                                               "solutions) for one env's domain to a native task file")
    generate.add_argument("--env", required=True,
                          help=f"env id ({', '.join(generator_env_ids()) or 'none has a generator'})")
    generate.add_argument("-n", type=int, required=True, help="number of tasks")
    generate.add_argument("--seed", type=int, default=0,
                          help="the seed (default 0); ids name content (gen-<domain>-<family>-<hash>), the same in "
                               "every seed")
    generate.add_argument("--split", choices=("train", "test"), default=None,
                          help="only families of this split (default: every family, each task marked with its split)")
    generate.add_argument("--output", required=True, metavar="FILE", help="the task file to write (.json or .yaml)")
    generate.add_argument("--exclude", nargs="+", default=[], metavar="FILE",
                          help="task files or folders (or bundled:/generated: specs, as tasks overlap reads) whose "
                               "tasks the set must not hold (same id, reference or answer); the generator's next "
                               "tasks take their place")
    generate.add_argument("--progress-every", type=int, default=1000, metavar="N",
                          help="written to a file or pipe: a progress line per N tasks checked (default 1000)")
    generate.set_defaults(func=cmd_generate)

    overlap = sub.add_parser("overlap", help="what two task sets share, by id, instruction, reference solution "
                                             "and answer; exit 1 when they share anything, 0 when not")
    overlap.add_argument("a", metavar="A", help=SPEC_HELP)
    overlap.add_argument("b", metavar="B", help="the same kinds as A, of the same domain")
    overlap.add_argument("--json", action="store_true", help="print the counts and examples as JSON")
    overlap.add_argument("--examples", type=int, default=5, help="examples shown per key (default 5)")
    overlap.set_defaults(func=cmd_overlap)

    schema = sub.add_parser("schema", help="print the JSON Schema of a domain's task files")
    schema.add_argument("--domain", default=default, help=f"default: {default}")
    schema.set_defaults(func=cmd_schema)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _selected(args: argparse.Namespace) -> tuple[list[tuple[Domain, TaskSpec]], list[TaskSource]]:
    """``(domain, task)`` of the bundled suites, or of the ``--tasks`` paths when given; only
    the ``--env`` domain's and only ``--split`` when given."""
    env = getattr(args, "env", None)
    split = getattr(args, "split", None)
    name = domain_for_env(env).name if env else args.domain
    if env and args.domain and args.domain != name:
        raise ConfigError(f"--env {env} is a {name} env, --domain says {args.domain}: give one of them.")
    if args.tasks:
        sources = load_sources(args.tasks, name, require_tasks=True)
        pairs = [(s.domain, t) for s in sources for t in s.result.tasks]
    else:
        sources = []
        chosen = [get_domain(name)] if name else domains()
        pairs = [(d, t) for d in chosen for t in d.bundled_tasks()]
    if split is not None:
        kept = {id(t) for t in filter_split([t for _, t in pairs], split, where="the selected tasks")}
        pairs = [(d, t) for d, t in pairs if id(t) in kept]
    return pairs, sources


def _report_problems(sources: list[TaskSource]) -> None:
    count = sum(len(s.result.problems) for s in sources)
    if count:
        print(f"warning: {count} item(s) of --tasks could not be converted and are left out; "
              "`agentunit-gym tasks validate PATH` lists them", file=sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    """Print a table of tasks (bundled, or of ``--tasks``), filtered by domain and category."""
    from rich.table import Table
    from rich.text import Text

    from agentunit_gym.cli.console import table_console

    pairs, sources = _selected(args)
    if args.json:
        chosen = [(d, t) for d, t in pairs if not args.category or t.category == args.category]
        items = task_items([t for _, t in chosen])
        for (domain, task), item in zip(chosen, items, strict=True):
            item["domain"] = domain.name
            item["split"] = task.split
        print(json.dumps(items, indent=1, ensure_ascii=False))
        _report_problems(sources)
        return 0
    table = Table(title="Tasks from --tasks" if args.tasks else "Bundled tasks")
    table.add_column("id", no_wrap=True)
    table.add_column("domain")
    table.add_column("category")
    table.add_column("backends")
    table.add_column("steps", justify="right")
    table.add_column("instruction", overflow="ellipsis", no_wrap=True, max_width=60)
    count = 0
    for domain, task in pairs:
        if args.category and task.category != args.category:
            continue
        # Text, not markup: an instruction's "[...]" is data, not a rich style tag.
        table.add_row(Text(task.id), Text(domain.name), Text(task.category),
                      Text((",".join(task.backends) if task.backends else "all")
                           + "".join(f" ({note})" for note in task.list_notes())), str(task.k_opt),
                      Text(task.instruction))
        count += 1
    console = table_console(file=sys.stdout)
    console.print(table)
    console.print(f"{count} task(s)")
    _report_problems(sources)
    for broken in broken_domains():
        print(f"warning: domain {broken.name!r} was skipped: {broken.reason}", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one task as YAML."""
    if args.tasks:
        pairs, sources = _selected(args)
        found = [(d, t) for d, t in pairs if t.id == args.task_id]
        if not found:
            raise TaskNotFoundError(f"no task {args.task_id!r} in {', '.join(args.tasks)}; see "
                                    "`agentunit-gym tasks list --tasks PATH`.")
        domain, task = found[0]
    else:
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
    """Validate each path; list every item that does not convert (file, line or item, task,
    field, reason); exit 1 when any path has a problem."""
    paths = [*args.paths, *(args.tasks or [])]
    if not paths:
        print("agentunit-gym tasks validate: error: give at least one PATH (a task file or folder)", file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        try:
            sources = load_path(path, args.domain, args.format)
        except TaskFileError as exc:
            failed += 1
            print(f"invalid: {exc}", file=sys.stderr)
            continue
        for source in sources:
            result = source.result
            for problem in result.problems:
                print(f"invalid: {problem}", file=sys.stderr)
            if result.problems:
                failed += 1
                print(f"{path}: {len(result.tasks)} task(s) valid, {len(result.problems)} problem(s) "
                      f"[{source.domain.name}, {source.format}]")
            else:
                print(f"ok: {path} ({len(result.tasks)} task(s)) [{source.domain.name}, {source.format}]")
    return 1 if failed else 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Run :func:`~agentunit_gym.core.generation.write_generated` and say what was written."""
    if args.n < 1:
        print(f"agentunit-gym tasks generate: error: -n must be at least 1, got {args.n}", file=sys.stderr)
        return 2
    excluded = [t for spec in args.exclude for t in load_task_set(spec).tasks]
    from agentunit_gym.cli.console import ItemProgress

    with ItemProgress("tasks generate", every=args.progress_every) as progress:
        domain, tasks, path = write_generated(args.env, args.n, seed=args.seed, split=args.split,
                                              output=args.output, exclude=excluded, progress=progress)
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.split or "none"] = counts.get(task.split or "none", 0) + 1
    splits = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"wrote {len(tasks)} {domain.name} task(s) to {path} ({splits}); ids {tasks[0].id} ... {tasks[-1].id}")
    return 0


def cmd_overlap(args: argparse.Namespace) -> int:
    """Run :func:`~agentunit_gym.core.task_sets.overlap_of`; print counts and examples per key."""
    found = overlap_of(args.a, args.b)
    if args.json:
        print(json.dumps(found.to_json(args.examples), indent=1, ensure_ascii=False))
        return 1 if found.overlap.any else 0
    result = found.overlap
    print(f"A: {args.a} ({result.a_count} {found.a.domain.name} task(s)); B: {args.b} ({result.b_count})")
    for key, count in result.counts().items():
        print(f"{key}: {count} task(s) of A share it with B")
        for shared in result.shared.get(key, ())[:args.examples]:
            print(f"  {_short(shared.value, 100)}: A {', '.join(shared.a_ids[:3])}; B {', '.join(shared.b_ids[:3])}"
                  + (f" (+{len(shared.b_ids) - 3})" if len(shared.b_ids) > 3 else ""))
    print("shared: yes" if result.any else "shared: nothing")
    return 1 if result.any else 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of the domain's task model."""
    print(json.dumps(get_domain(args.domain).task_model.model_json_schema(), indent=2))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run :func:`~agentunit_gym.eval.taskcheck.check_tasks` and print its table (or JSON)."""
    from rich.table import Table
    from rich.text import Text

    from agentunit_gym.cli.console import ItemProgress, table_console
    from agentunit_gym.eval.record.records import EpisodeRecord
    from agentunit_gym.eval.taskcheck import check_tasks
    from agentunit_gym.tasks.spec import NEEDS_NETWORK

    if args.concurrency < 1:
        print("agentunit-gym tasks check: error: --concurrency must be at least 1", file=sys.stderr)
        return 2
    options: dict[str, dict[str, Any]] = {}
    if args.env_option:  # checked against the envs the paths hold tasks of; none: check_tasks says why
        from agentunit_gym.core.task_sources import tasks_by_domain
        from agentunit_gym.eval.plan.env_options import resolve_env_options

        run_envs = [get_domain(name).envs[0].id for name in tasks_by_domain(load_sources(args.paths))]
        options = resolve_env_options(args.env_option, run_envs, args.backends or ("auto",)) if run_envs else {}
    with ItemProgress("tasks check: oracle episodes", every=args.progress_every) as progress:
        def episode_done(record: EpisodeRecord, done: int, total: int) -> None:
            mark = "ok" if record.success else (record.finish_reason or record.status)
            progress(done, total, f"{record.task_id}: {mark}")

        result = check_tasks(args.paths, backends=args.backends or ("auto",), output=args.output,
                             concurrency=args.concurrency, network=args.network, env_options_by_env=options,
                             progress=episode_done)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0 if result.ok else 1
    table = Table(title="Task check (oracle agent)")
    for name in ("file", "domain", "loaded", "not converted", "ran", "passed", "failed", "not run"):
        table.add_column(name, justify="left" if name in ("file", "domain") else "right",
                         overflow="fold")
    table.add_column("top reasons", overflow="fold", max_width=70)
    for f in result.files:
        reasons = "\n".join(f"{count}x {_short(reason)}" for reason, count in f.top_reasons())
        table.add_row(Text(f.file), Text(f.domain), str(f.loaded), str(len(f.not_converted)), str(f.ran),
                      str(f.passed), str(len(f.failed)), str(len(f.not_run)), Text(reasons))
    console = table_console(file=sys.stdout)
    console.print(table)
    for f in result.files:
        for failure in [*f.not_converted, *f.not_run, *f.failed]:
            detail = f" ({failure.detail})" if failure.reason == NEEDS_NETWORK and failure.detail else ""
            console.print(Text(f"{f.file}: {failure.where}: {failure.reason}{detail}"))
    for env_id, why in result.needs_server.items():
        console.print(Text(f"{env_id} ran nothing: {why}"))
    if result.stopped is not None:
        console.print(Text(f"the oracle run stopped early: {result.stopped}"))
    if result.run_dir is not None:
        console.print(f"oracle run: {result.run_dir}")
    console.print("ok: every item loaded and passed" if result.ok else "not ok: some items did not load or pass")
    return 0 if result.ok else 1


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
