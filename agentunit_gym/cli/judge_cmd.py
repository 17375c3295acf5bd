"""``agentunit-gym judge``: add judged metrics (goal fidelity, verified criteria, the judge's
agreement with the env's check) to a finished run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_judge_options(p: argparse.ArgumentParser, *, for_eval: bool = False) -> None:
    """The judge's options (shared by ``judge`` and ``eval --judge``)."""
    p.add_argument("--judge", default=None, required=not for_eval, metavar="openai:MODEL",
                   help="the judge model (critic, quantifier and verifier), e.g. openai:gpt-4o-mini"
                        + ("; judge the run when it ends" if for_eval else "")
                        + " (exit code 4 when no episode could be judged)")
    if not for_eval:
        p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint of the judge")
        p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env variable holding the judge's API key")
    p.add_argument("--criteria", default="critic", metavar="critic|bundled|FILE",
                   help="critic: proposed by the judge from the run (default); bundled: each domain's reviewed "
                        "defaults; or a criteria YAML file (docs/judge.md)")
    p.add_argument("--judge-repeats", type=int, default=3, help="verifier: quantifications per example episode")
    p.add_argument("--judge-concurrency", type=int, default=4, help="judge calls in flight at once")
    from agentunit_gym.cli.arguments import add_model_options

    add_model_options(p, prefix="judge-" if for_eval else "")


def judge_config(args: argparse.Namespace) -> Any:
    """The :class:`~agentunit_gym.eval.judge.JudgeConfig` the options describe."""
    from agentunit_gym.eval.judge import JudgeConfig, parse_judge_spec

    criteria: Any = args.criteria if args.criteria in ("critic", "bundled") else Path(args.criteria)
    from agentunit_gym.cli.arguments import model_settings

    # ``eval --judge`` names the judge's settings --judge-temperature ...; ``judge`` names them plainly.
    prefix = "judge-" if hasattr(args, "judge_base_url") else ""
    model = parse_judge_spec(args.judge, base_url=getattr(args, "judge_base_url", None) or args.base_url,
                             api_key_env=args.api_key_env or "OPENAI_API_KEY", **model_settings(args, prefix))
    return JudgeConfig(model, criteria=criteria, repeats=args.judge_repeats, concurrency=args.judge_concurrency)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "judge", help="add judged metrics (goal fidelity, criteria) to a finished run",
        description="Judge the episodes of a finished run with a model: criteria per domain and category "
                    "(proposed by a critic, or bundled, or from a file) verified for stability and separation, "
                    "every episode quantified, goal_fidelity and one metric per criterion added to summary.json "
                    "and report.html with the judge's agreement with the env's check. Answers are asked for as "
                    "JSON by schema (response_format), in plain text from a server that refuses it. Resumable. "
                    "Exit codes: 0 when at least one episode of the run is judged; 4 when none could be "
                    "(every answer garbage, refused or failed, or no episode to judge); 1 on another error.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="an eval's output directory")
    add_judge_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from agentunit_gym.cli.console import table_console

    outcome, summary, report = judge_with_progress(args.run_dir, judge_config(args), quiet=args.quiet)
    if not args.quiet:
        print_judge_summary(table_console(), summary)
    Console(stderr=True, quiet=args.quiet, highlight=False).print(judge_line(outcome, report), markup=False)
    return nothing_judged_exit(args.run_dir, outcome)


def judge_line(outcome: Any, report: Path) -> str:
    """The closing line of a judge run: counts, the answers' format, tokens, time."""
    usage = outcome.usage
    tokens = (f"{usage.tokens_in or 0} tokens in, {usage.tokens_out or 0} out" if usage.tokens_in is not None
              else "tokens not reported")
    return (f"{outcome.judged} episodes judged, {outcome.unjudged} unjudged, {outcome.skipped} judged before, "
            f"in {outcome.elapsed_s:.1f} s (answers as {outcome.reply_format}; {tokens}). Report: {report}")


def nothing_judged_exit(run_dir: Path, outcome: Any) -> int:
    """:data:`~agentunit_gym.eval.judge.run.EXIT_NOTHING_JUDGED` with the reason on stderr when no
    episode of the run is judged; else 0."""
    import sys

    from agentunit_gym.eval.judge.run import EXIT_NOTHING_JUDGED, read_judged

    if not outcome.nothing_judged:
        return 0
    lines = [v for v in read_judged(run_dir).values() if v.status == "unjudged"]
    why = (f"all {len(lines)} answers were unusable (first: {lines[0].error_kind}: {lines[0].error[:200]})" if lines
           else "the run has no episode to judge")
    print(f"agentunit-gym: error: nothing could be judged: {why}. Judged runs need a judge that answers in JSON; "
          f"see {run_dir / 'judge' / 'judged.jsonl'}.", file=sys.stderr)
    return EXIT_NOTHING_JUDGED


def judge_with_progress(run_dir: Path, config: Any, *, quiet: bool) -> Any:
    """Judge with a progress bar on stderr; returns what ``judge_and_report`` returns."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentunit_gym.eval.judging import judge_and_report

    console = Console(stderr=True, quiet=quiet)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), console=console, disable=quiet) as bar:
        task = bar.add_task("judging", total=None, last="")

        def progress(line: Any, done: int, total: int) -> None:
            mark = f"{line.goal_fidelity:.2f}" if line.status == "judged" else f"unjudged ({line.error_kind})"
            bar.update(task, completed=done, total=total, last=f"{line.key}: {mark}")

        return judge_and_report(run_dir, config, progress=progress)


def print_judge_summary(console: Any, summary: dict[str, Any]) -> None:
    """The judged metrics, the agreement and the dropped criteria, as rich tables."""
    from rich.table import Table

    from agentunit_gym.eval.report.html import fmt

    block = summary.get("judge")
    if not block:
        return
    table = Table(title=f"Judged by {block['judge']} ({block['judged']} judged, {block['unjudged']} unjudged)")
    for col in ("metric", "value", "95% CI", "n"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for name, m in block["metrics"].items():
        if m["value"] is None:
            continue
        ci = f"[{fmt(m['ci_low'])}, {fmt(m['ci_high'])}]" if m["ci_low"] is not None else ""
        table.add_row(name, fmt(m["value"]), ci, str(m["n"]))
    console.print(table)
    dropped = [(s["domain"], s["category"], d) for s in block["criteria"] for d in s.get("dropped", [])]
    if dropped:
        gone = Table(title="Criteria dropped by the verifier")
        for col in ("domain/category", "criterion", "reason"):
            gone.add_column(col)
        for domain, category, d in dropped:
            gone.add_row(f"{domain}/{category}", d["criterion"]["name"], d["reason"])
        console.print(gone)
