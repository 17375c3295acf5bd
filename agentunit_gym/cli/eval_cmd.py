"""``agentunit-gym eval``: run an agent over task suites and write the results."""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
from pathlib import Path
from typing import Any

from agentunit_gym.cli.arguments import (
    MODEL_SETTINGS,
    add_model_options,
    fraction,
    model_settings,
    positive_float,
    positive_int,
)
from agentunit_gym.core import registry
from agentunit_gym.errors import EXIT_ENDPOINT_DOWN, ConfigError, EndpointDownError
from agentunit_gym.eval.plan.config import PROTOCOLS
from agentunit_gym.tasks.splits import SPLITS
from agentunit_gym.wrappers.protocols import DEFAULT_PROTOCOL, default_invalid_policy

# Options that define a run (stored in config.json). Their parser default is None, so a
# resume can tell "not given" (take the stored value) from "given" (must match it).
_DEFAULTS: dict[str, Any] = {"agent": "oracle", "runs": 1, "concurrency": 4, "seed": 0, "episode_timeout": 600.0,
                             "protocol": "agentunit", "api_key_env": "OPENAI_API_KEY"}


def backend_choices() -> list[str]:
    """``auto`` and every registered domain's backend names (the ``--backend`` choices)."""
    names = ["auto"]
    for domain in registry.domains():
        names += [b for b in domain.backend_names if b not in names]
    return names


def backend_help() -> str:
    return " | ".join(f"{' | '.join(d.backend_names)} ({d.name})" for d in registry.domains())


def env_ids() -> list[str]:
    return registry.env_ids()


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="run an agent over task suites (metrics, traces, report)",
        description="Run an agent over AgentUnit envs with repeats and concurrency; write episodes.jsonl, "
                    "traces/, summary.json and report.html under the output directory.")
    p.add_argument("--env", action="append", dest="envs", metavar="ENV",
                   help=f"env id: {', '.join(env_ids()) or 'none registered'} (short ids work; repeatable; "
                        "default: every registered env, or the domains --tasks holds tasks of)")
    p.add_argument("--tasks", action="append", dest="tasks", default=None, metavar="PATH",
                   help="task file or folder instead of the bundled suite: native YAML/JSON task files, or a "
                        "format a domain's loader detects (AgentBench's data/ folder or one of its data files); "
                        "format and domain detected; repeatable (docs/tasks.md)")
    p.add_argument("--agent", default=None,
                   help="oracle | random | openai:<model> | module:attr (imported from the current folder) | "
                        "./file.py:attr (default oracle)")
    p.add_argument("--backend", action="append", dest="backends", metavar="BACKEND", choices=backend_choices(),
                   help=f"auto | {backend_help()}; repeatable, one per domain; default auto")
    p.add_argument("-n", type=positive_int, default=None, help="tasks sampled per env (seeded); default all")
    p.add_argument("--runs", type=positive_int, default=None, help="repeats per task (for pass@k, pass^k); default 1")
    p.add_argument("--concurrency", type=positive_int, default=None, help="episodes in flight per env; default 4")
    p.add_argument("--task-id", action="append", dest="task_ids", default=None, metavar="ID")
    p.add_argument("--category", action="append", dest="categories", default=None, metavar="C")
    p.add_argument("--split", choices=SPLITS, default=None,
                   help="only the tasks of this split: train or test for the bundled suites and generated sets, "
                        "dev or test for AgentBench's data (docs/tasks.md, \"Splits\"); default every task")
    p.add_argument("--output", type=Path, default=None,
                   help="run folder; default a new results/<time>-<agent> (with --resume: the latest run)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --output (default: the latest) with the settings in its config.json")
    p.add_argument("--trap-rate", type=fraction, default=None, help="share of episodes with a trap injected (0-1)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--episode-timeout", type=positive_float, default=None,
                   help="wall-clock seconds per episode (default 600)")
    p.add_argument("--max-steps", type=positive_int, default=None,
                   help="turn limit per episode (default: the task's, else the domain's)")
    p.add_argument("--protocol", choices=PROTOCOLS, default=None,
                   help="agentunit (default) | agentbench: AgentBench's settings at once (an invalid reply ends "
                        "the episode, the domain's AgentBench turn limit, its observation caps, the ReAct prompt) | "
                        "agentbench-fc: the same with AgentBench FC's tool schemas, from each domain's description")
    p.add_argument("--agentbench-root", type=Path, default=None, metavar="DIR",
                   help="an AgentBench checkout (v0.2, the text protocol): under --protocol agentbench each "
                        "episode opens with AgentBench's own instructions, acknowledgement and one-shot, read from "
                        "it. Default: the checkout a --tasks path lies in; without one, agentunit-gym's own prompt "
                        "(the run's config and report say which)")
    p.add_argument("--invalid-action", choices=["continue", "terminate"], default=None,
                   help="an invalid reply: continue with feedback (default) or terminate the episode "
                        "(AgentBench; the default under --protocol agentbench)")
    p.add_argument("--env-option", dest="env_option", action="append", default=None, metavar="[ENV:]KEY=VALUE",
                   help="an env keyword argument (repeatable): KEY=VALUE for every env of the run that takes KEY, "
                        "ENV:KEY=VALUE for that env only (an endpoint, a server URL, a data path: the env's "
                        "docs page lists its options); VALUE is read as JSON when it parses. Stored in "
                        "config.json; a --resume must match it")
    p.add_argument("--network", action="store_true", default=None,
                   help="give the envs the network (the OS sandboxes; other envs are unaffected). Off by default: "
                        "tasks that need it (package installs, downloads) are then left out and listed")
    p.add_argument("--full-text", action="store_true", default=None,
                   help="record every text of the traces in full (default: capped at 4000 characters), so "
                        "`agentunit-gym export` gives untruncated conversations")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--api-key-env", default=None, help="env variable holding the API key (default OPENAI_API_KEY)")
    p.add_argument("--tools", action="store_true", default=None,
                   help="openai agents: native tool calling instead of ReAct text")
    p.add_argument("--prices", type=Path, default=None, help="JSON price table {model: [in, out] USD per 1M tokens}")
    p.add_argument("--vector", choices=["sync", "threads", "async"], default=None,
                   help="where the env copies live: async puts each in a gymnasium AsyncVectorEnv, a process of "
                        "its own; sync in a one-env SyncVectorEnv here; threads (the default) in this process. "
                        "Episodes always step as soon as their own agent replies (docs/eval.md)")
    p.add_argument("--max-rps", type=positive_float, default=None,
                   help="openai agents: requests per second to the endpoint at most, over all episodes")
    add_model_options(p)
    p.add_argument("--no-endpoint-check", dest="endpoint_check", action="store_false",
                   help="openai agents: skip the one request that checks the endpoint before the first episode")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the episodes on a Ray cluster: local (start Ray here), auto (join the cluster this "
                        "machine belongs to), HOST:PORT or ray://HOST:PORT; --concurrency is then the total in "
                        "flight across the cluster (docs/eval.md, \"Running on a cluster\"; needs "
                        "agentunit-gym[ray])")
    p.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    from agentunit_gym.cli.judge_cmd import add_judge_options

    add_judge_options(p, for_eval=True)
    p.add_argument("--judge-base-url", default=None, help="the judge's endpoint (default: --base-url)")
    p.set_defaults(func=run)


def check_env_ids(envs: list[str]) -> None:
    """Refuse an env id no registered domain has, naming the closest one.

    Raises:
        ConfigError: an unknown id.
    """
    known = env_ids()
    shorts = {k.split("/", 1)[1]: k for k in known}
    for env in envs:
        if env in known or env in shorts:
            continue
        lowered = {k.lower(): k for k in [*known, *shorts]}
        guess = lowered.get(env.lower()) or next(iter(difflib.get_close_matches(env, [*known, *shorts], n=1)), None)
        hint = f" Did you mean {guess}?" if guess else ""
        raise ConfigError(f"unknown env {env!r}.{hint} Registered envs: {', '.join(known) or 'none'}.")


def _check_output(output: Path | None) -> None:
    if output is not None and output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is a file; give a folder for the run (it is created if missing).")


def build_config(args: argparse.Namespace) -> tuple[Any, Path | None]:
    """The run's :class:`EvalConfig` and its folder, from the options and, on ``--resume``, config.json.

    Options not given on the command line take the stored run's values, so ``--resume
    --output DIR`` alone continues that run; options given must match it (checked when
    the run starts).

    Raises:
        ConfigError: bad options, or nothing to resume.
    """
    from pydantic import ValidationError

    from agentunit_gym.core.task_sources import load_sources, tasks_by_domain
    from agentunit_gym.eval.plan.config import EvalConfig
    from agentunit_gym.eval.record.run_dir import latest_run_dir, stored_config

    _check_output(args.output)
    output = args.output
    stored: dict[str, Any] = {}
    if args.resume:
        output = output if output is not None else latest_run_dir()
        found = stored_config(output)
        if found is None:
            raise ConfigError(f"--resume: {output} holds no run (no config.json); start it without --resume.")
        stored = found.model_dump()
    given: dict[str, Any] = {
        "envs": args.envs, "agent": args.agent, "backends": args.backends, "n": args.n, "runs": args.runs,
        "concurrency": args.concurrency, "task_ids": args.task_ids, "categories": args.categories,
        "trap_rate": args.trap_rate, "seed": args.seed, "episode_timeout_s": args.episode_timeout,
        "vector": args.vector, "protocol": args.protocol, "invalid_action": args.invalid_action,
        "network": args.network, "full_text": args.full_text,
    }
    if args.envs:
        check_env_ids(args.envs)
    if args.tasks:
        paths = [str(Path(t).resolve()) for t in args.tasks]
        given["tasks"] = paths
        if not args.envs and not stored:
            grouped = tasks_by_domain(load_sources(paths, require_tasks=True))
            given["envs"] = [registry.get_domain(name).envs[0].id for name in grouped]
    if args.max_steps is not None:
        given["env_options"] = {**stored.get("env_options", {}), "max_steps": args.max_steps}
    if args.split is not None:
        # Every env takes split= (AgentEnv), so the split travels as an env option and a resume keeps it.
        given["env_options"] = {**(given.get("env_options") or stored.get("env_options", {})), "split": args.split}
    agent_settings = dict(stored.get("agent_settings", {}))
    for key, value in (("base_url", args.base_url), ("api_key_env", args.api_key_env), ("max_rps", args.max_rps)):
        if value is not None:
            agent_settings[key] = value
    if args.tools:
        agent_settings["mode"] = "tools"
    agent_settings.update(model_settings(args))
    data = {**stored, **{k: v for k, v in given.items() if v is not None}, "agent_settings": agent_settings}
    if args.env_option:
        from agentunit_gym.eval.plan.env_options import resolve_env_options
        from agentunit_gym.eval.plan.routing import full_env_id

        run_envs = [full_env_id(e) for e in (data.get("envs") or env_ids())]
        merged = {k: dict(v) for k, v in stored.get("env_options_by_env", {}).items()}
        for env_id, options in resolve_env_options(args.env_option, run_envs,
                                                   data.get("backends") or ("auto",)).items():
            merged.setdefault(env_id, {}).update(options)
        data["env_options_by_env"] = merged
    if not stored:
        data.setdefault("envs", env_ids())
        data.setdefault("agent", _DEFAULTS["agent"])
        if data.get("invalid_action") is None:
            data["invalid_action"] = default_invalid_policy(data.get("protocol") or DEFAULT_PROTOCOL)
    _set_agentbench_root(data, args.agentbench_root)
    try:
        return EvalConfig.model_validate(data), output
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{field}: {first['msg']}.") from None


def _set_agentbench_root(data: dict[str, Any], given: Path | None) -> None:
    """Put the AgentBench checkout of the run in ``data`` (``--agentbench-root``, else the one a
    ``--tasks`` path lies in) when the protocol is ``agentbench``.

    The checkout's prompts are read for every env of the run: one named by ``--agentbench-root``
    that does not hold them stops the run; one found above ``--tasks`` is dropped with a note
    on stderr (the run gets our prompts).

    Raises:
        ConfigError: ``--agentbench-root`` under another protocol, a folder that is not a
            checkout, or (``AgentBenchCheckoutError``) a named checkout without the prompts.
    """
    from agentunit_gym.tasks.agentbench_checkout import resolve_checkout

    protocol = data.get("protocol") or "agentunit"
    if protocol != "agentbench":
        if given is not None:
            raise ConfigError("--agentbench-root gives AgentBench's prompts to --protocol agentbench; add that "
                              f"protocol or drop the option (this run's protocol: {protocol}).")
        return
    if given is None and data.get("agentbench_root"):
        return  # a resume keeps the stored checkout
    root = resolve_checkout(given, data.get("tasks") or ())
    data["agentbench_root"] = str(root) if root is not None else None
    if root is None:
        return
    from agentunit_gym.errors import AgentBenchCheckoutError
    from agentunit_gym.eval.plan.routing import full_env_id

    try:
        for env_id in data.get("envs") or ():
            domain = registry.domain_of_env(full_env_id(env_id))
            preset = domain.protocols.get("agentbench") if domain is not None else None
            if preset is not None and preset.conversation is not None:
                preset.conversation(root)  # read now, uncached: the checkout as it is
    except AgentBenchCheckoutError as exc:
        if given is not None:
            raise  # asked for by name: stop before the first episode
        # Found above --tasks, not asked for: a checkout of another release (the function-calling
        # one has no text-protocol modules) must not stop the run; it gets our prompts, said so.
        print(f"agentunit-gym: the AgentBench checkout {root} (found above --tasks) does not hold the "
              f"text-protocol prompts this version reads ({exc}); the run uses agentunit-gym's own prompts. "
              "Give --agentbench-root to insist.", file=sys.stderr)
        data["agentbench_root"] = None


def check_agentbench_prompts(config: Any) -> list[str]:
    """One line per env of a ``--protocol agentbench`` run saying where its opening turns come
    from (the checkout's module, or our own prompt).

    Raises:
        AgentBenchCheckoutError: a task module is missing or laid out otherwise.
    """
    from agentunit_gym.eval.plan.routing import env_domain
    from agentunit_gym.wrappers.protocols import scripted_conversation

    lines = []
    for env_id in config.envs:
        domain = env_domain(env_id)
        conversation = (scripted_conversation(domain, config.protocol, config.agentbench_root)
                        if domain and config.agentbench_root else None)
        source = conversation.source if conversation is not None else "agentunit-gym's own prompt"
        lines.append(f"{env_id}: prompts from {source}")
    return lines


def resume_command(run_dir: Path) -> str:
    """The exact command that continues the run in ``run_dir``."""
    return f"agentunit-gym eval --resume --output {shlex.quote(str(run_dir))}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agentunit_gym.core.task_sources import load_sources, problems_of
    from agentunit_gym.eval.agents.builtin import resolve_agent
    from agentunit_gym.eval.plan.routing import check_task_paths

    config, output = build_config(args)
    err = Console(stderr=True, quiet=args.quiet, highlight=False)
    if config.tasks:
        # A path no task loads from, or one whose tasks no env of the run takes, stops here (exit 2):
        # the run would otherwise go on with the bundled suites alone.
        sources = load_sources(config.tasks, require_tasks=True)
        check_task_paths(config.tasks, config.envs)
        for source in sources:
            err.print(f"--tasks {source.path}: {len(source.result.tasks)} task(s) of the {source.domain.name} "
                      f"domain ({source.format} format)", markup=False)
        problems = problems_of(sources)
        for problem in problems:
            print(f"agentunit-gym: skipped: {problem}", file=sys.stderr)
        if problems:
            print(f"agentunit-gym: {len(problems)} item(s) could not be converted and are left out "
                  "(`agentunit-gym tasks validate` lists them)", file=sys.stderr)
    if config.protocol == "agentbench":
        if config.agentbench_root is None:
            err.print("--protocol agentbench without an AgentBench checkout: the agent gets agentunit-gym's own "
                      "prompt (give --agentbench-root DIR for AgentBench's own; docs/eval.md)",
                      markup=False, soft_wrap=True)
        else:
            for line in check_agentbench_prompts(config):
                err.print(line, markup=False, soft_wrap=True)
    agent_options: dict[str, Any] = {}
    settings = config.agent_settings
    if settings.get("mode"):
        agent_options["mode"] = settings["mode"]
    elif config.protocol == "agentbench-fc":
        agent_options["mode"] = "tools"  # AgentBench FC is a function-calling protocol
    if settings.get("max_rps") is not None:
        agent_options["max_rps"] = settings["max_rps"]
    agent_options.update({k: v for k, v in settings.items() if k in (*MODEL_SETTINGS.values(), "extra_body")})
    if args.prices is not None:
        from agentunit_gym.eval.agents.openai_agent import load_price_table

        agent_options["prices"] = load_price_table(args.prices)
    remote = None
    if args.ray is not None:  # before anything on disk: an unreachable cluster leaves nothing behind
        from agentunit_gym.eval.run.cluster import connect_cluster

        if config.vector is not None:
            raise ConfigError("--ray makes the env copies on the cluster's nodes; drop --vector (where the copies "
                              "live in this process).")
        remote = connect_cluster(args.ray)
        if "max_rps" in agent_options:  # one rate gate per node's actor: each gets its share
            agent_options["max_rps"] = agent_options["max_rps"] / max(1, remote.node_count())
    try:
        # The agent first (a typo in --agent, a dead endpoint): nothing on screen or disk before it answers.
        _, agent_factory = resolve_agent(config.agent, base_url=settings.get("base_url"),
                                         api_key_env=settings.get("api_key_env", _DEFAULTS["api_key_env"]),
                                         check_endpoint=args.endpoint_check, **agent_options)
        return _run(args, config, output, agent_factory, remote, err)
    finally:
        if remote is not None:
            remote.close()


def _run(args: argparse.Namespace, config: Any, output: Path | None, agent_factory: Any, remote: Any,
         err: Any) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentunit_gym.cli.console import table_console
    from agentunit_gym.eval.evaluate import RunStopped, evaluate
    from agentunit_gym.eval.record.records import EpisodeRecord
    from agentunit_gym.eval.record.run_dir import prepare_run_dir

    run_dir = prepare_run_dir(config, output, resume=args.resume)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=err, transient=False,
                  disable=args.quiet) as bar:
        task = bar.add_task("episodes", total=None, last="")

        def progress(record: EpisodeRecord, done: int, total: int) -> None:
            mark = "ok" if record.success else (record.finish_reason or record.status)
            bar.update(task, completed=done, total=total, last=f"{record.task_id} r{record.run}: {mark}")

        try:
            result = evaluate(config, run_dir, resume=args.resume, agent_factory=agent_factory, progress=progress,
                              remote=remote)
        except KeyboardInterrupt:
            print(f"agentunit-gym: interrupted; the finished episodes are saved in {run_dir}. "
                  f"Continue with: {resume_command(run_dir)}", file=sys.stderr)
            return 130
        except RunStopped as exc:
            print(f"agentunit-gym: error: {exc} Once it is fixed, continue with: {resume_command(run_dir)}",
                  file=sys.stderr)
            return EXIT_ENDPOINT_DOWN if isinstance(exc, EndpointDownError) else 1
    from agentunit_gym.cli.judge_cmd import judge_config, judge_with_progress, print_judge_summary

    summary = result.summary
    judge_exit = 0
    if args.judge:
        from agentunit_gym.cli.judge_cmd import nothing_judged_exit

        judged, summary, _ = judge_with_progress(result.run_dir, judge_config(args), quiet=args.quiet)
        judge_exit = nothing_judged_exit(result.run_dir, judged)
    if not args.quiet:
        print_summary(table_console(), summary)
        print_judge_summary(table_console(), summary)
    records = result.outcome.records
    left_out = result.outcome.left_out
    for lo in left_out:
        err.print(f"left out: {lo.env_id} {lo.task_id}: {lo.reason}", markup=False)
    err.print(f"{len(records)} episodes run, {result.outcome.skipped} already done, "
              + (f"{len(left_out)} task(s) left out (summary.json lists them), " if left_out else "")
              + f"in {result.outcome.elapsed_s:.1f} s. Results: {result.run_dir} (report: {result.report})",
              markup=False)
    print(result.run_dir)
    if left_out and not records and not result.outcome.skipped:
        print(f"agentunit-gym: error: nothing ran: every task of this run was left out ({len(left_out)}); "
              f"first reason: {left_out[0].reason}", file=sys.stderr)
        return 1
    lost = [r for r in records if r.status == "endpoint_error"]
    if lost:
        err.print(f"{len(lost)} episode(s) cut short by the model endpoint (endpoint_error) are left out of the "
                  f"metrics; run them again with: {resume_command(result.run_dir)}", markup=False)
    failed = [r for r in records if r.status != "done"]
    if records and len(failed) == len(records):
        reasons = sorted({r.error.splitlines()[0][:200] for r in failed if r.error})
        print(f"agentunit-gym: error: every episode of this run ended in an error ({len(failed)} of {len(records)}); "
              f"first reason: {reasons[0] if reasons else 'unknown'}", file=sys.stderr)
        return 1
    return judge_exit


def print_summary(console: Any, summary: dict[str, Any]) -> None:
    """The run's protocol, the headline metrics and the finish-reason table, as rich tables."""
    from rich.table import Table

    from agentunit_gym.core.finish import FinishReason
    from agentunit_gym.eval.report.html import fmt, headline_names, model_settings_line, prompt_source_line

    config = summary.get("config") or {}
    console.print(f"protocol: {config.get('protocol', 'agentunit')}, "
                  f"invalid action: {config.get('invalid_action', 'continue')}, "
                  f"network: {'on' if config.get('network') else 'off'}", markup=False)
    if config.get("protocol") == "agentbench":
        console.print(f"prompts: {prompt_source_line(config)}", markup=False, soft_wrap=True)
    settings = model_settings_line(config.get("agent_settings") or {})
    if settings:
        console.print(settings.rstrip(" |"), markup=False)
    statuses = summary.get("status") or {}
    if any(statuses.get(s) for s in ("endpoint_error", "infra_error", "agent_error", "task_error")):
        # Kept apart from the metrics, as AgentBench keeps task errors apart from agent failures.
        console.print("episodes by status: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
                      + " (endpoint_error and infra_error are left out of the metrics)", markup=False)
    table = Table(title="Metrics (95% CI)")
    for col in ("metric", "value", "95% CI", "n"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    metrics = summary["overall"]["metrics"]
    for name in (*headline_names(), "steps", "wall_time", "tokens_in", "tokens_out", "cost", "red_team_score"):
        m = metrics.get(name)
        if m is None or m["value"] is None:
            continue
        ci = f"[{fmt(m['ci_low'], m['unit'])}, {fmt(m['ci_high'], m['unit'])}]" if m["ci_low"] is not None else ""
        table.add_row(name, fmt(m["value"], m["unit"]), ci, str(m["n"]))
    console.print(table)
    finish = Table(title="Finish reasons")
    labels = [r.abbreviation for r in FinishReason]
    for col in ("env", "agent", "n", *labels):
        finish.add_column(col)
    for row in summary["finish_reasons"]:
        finish.add_row(row["env"], row["agent"], str(int(row["n"])), *(f"{100 * row[lab]:.1f}%" for lab in labels))
    console.print(finish)
