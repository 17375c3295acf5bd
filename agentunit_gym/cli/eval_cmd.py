"""``agentunit-gym eval``: run an agent over task suites and write the results."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agentunit_gym.core import registry
from agentunit_gym.eval.config import DEFAULT_VECTOR_MODE


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
                        "default: every registered env)")
    p.add_argument("--agent", default="oracle", help="oracle | random | openai:<model> | module:attr (default oracle)")
    p.add_argument("--backend", action="append", dest="backends", metavar="BACKEND", choices=backend_choices(),
                   help=f"auto | {backend_help()}; repeatable, one per domain; default auto")
    p.add_argument("--tasks", type=Path, default=None, metavar="PATH",
                   help="tasks instead of the bundled suite: native task files or folders, or a format the env's "
                        "domain detects (e.g. an AgentBench checkout's data/); give one --env with it")
    p.add_argument("-n", type=int, default=None, help="tasks sampled per env (seeded); default all")
    p.add_argument("--runs", type=int, default=1, help="repeats per task (for pass@k, pass^k); default 1")
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight per env; default 4")
    p.add_argument("--task-id", action="append", dest="task_ids", default=[], metavar="ID")
    p.add_argument("--category", action="append", dest="categories", default=[], metavar="C")
    p.add_argument("--output", type=Path, default=None, help="run directory; default results/<time>-<agent>")
    p.add_argument("--resume", action="store_true", help="continue the run in --output (default: the latest)")
    p.add_argument("--trap-rate", type=float, default=None, help="share of episodes with a trap injected")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episode-timeout", type=float, default=600.0, help="wall-clock seconds per episode")
    p.add_argument("--max-steps", type=int, default=None, help="turn limit per episode (default: the domain's)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env variable holding the API key")
    p.add_argument("--tools", action="store_true", help="openai agents: native tool calling instead of ReAct text")
    p.add_argument("--prices", type=Path, default=None, help="JSON price table {model: [in, out] USD per 1M tokens}")
    p.add_argument("--vector", choices=["sync", "threads", "async"], default=None,
                   help="run episodes in lockstep over this gymnasium vector env (RL-style; "
                        f"{DEFAULT_VECTOR_MODE} was the fastest of the three). Default: asynchronous episodes, "
                        "each stepping as soon as its own agent replies (docs/eval.md)")
    p.add_argument("--max-rps", type=float, default=None,
                   help="openai agents: requests per second to the endpoint at most, over all episodes")
    p.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    from agentunit_gym.cli.judge_cmd import add_judge_options

    add_judge_options(p, for_eval=True)
    p.add_argument("--judge-base-url", default=None, help="the judge's endpoint (default: --base-url)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentunit_gym.eval.config import EvalConfig
    from agentunit_gym.eval.evaluate import evaluate
    from agentunit_gym.eval.records import EpisodeRecord

    agent_options: dict[str, Any] = {}
    if args.tools:
        agent_options["mode"] = "tools"
    if args.max_rps is not None:
        agent_options["max_rps"] = args.max_rps
    if args.prices is not None:
        from agentunit_gym.eval.openai_agent import load_price_table

        agent_options["prices"] = load_price_table(args.prices)
    env_options: dict[str, Any] = {}
    if args.max_steps is not None:
        env_options["max_steps"] = args.max_steps
    if args.tasks is not None:
        env_options["tasks"] = str(args.tasks.resolve())
    config = EvalConfig(
        envs=tuple(args.envs or env_ids()), agent=args.agent, backends=tuple(args.backends or ["auto"]), n=args.n,
        runs=args.runs, concurrency=args.concurrency, task_ids=tuple(args.task_ids),
        categories=tuple(args.categories), trap_rate=args.trap_rate, seed=args.seed,
        episode_timeout_s=args.episode_timeout, vector=args.vector, env_options=env_options,
    )
    console = Console(stderr=True, quiet=args.quiet)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=console, transient=False,
                  disable=args.quiet) as bar:
        task = bar.add_task("episodes", total=None, last="")

        def progress(record: EpisodeRecord, done: int, total: int) -> None:
            mark = "ok" if record.success else (record.finish_reason or record.status)
            bar.update(task, completed=done, total=total, last=f"{record.task_id} r{record.run}: {mark}")

        result = evaluate(config, args.output, resume=args.resume, base_url=args.base_url,
                          api_key_env=args.api_key_env, agent_options=agent_options, progress=progress)
    from agentunit_gym.cli.judge_cmd import judge_config, judge_with_progress, print_judge_summary

    summary = result.summary
    if args.judge:
        _, summary, _ = judge_with_progress(result.run_dir, judge_config(args), quiet=args.quiet)
    if not args.quiet:
        print_summary(Console(), summary)
        print_judge_summary(Console(), summary)
    Console(stderr=True, quiet=args.quiet).print(
        f"{len(result.outcome.records)} episodes run, {result.outcome.skipped} already done, "
        f"in {result.outcome.elapsed_s:.1f} s. Results: {result.run_dir} (report: {result.report})")
    print(result.run_dir)
    return 0


def print_summary(console: Any, summary: dict[str, Any]) -> None:
    """The headline metrics and the finish-reason table, as rich tables."""
    from rich.table import Table

    from agentunit_gym.core.finish import FinishReason
    from agentunit_gym.eval.report import fmt, headline_names

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
