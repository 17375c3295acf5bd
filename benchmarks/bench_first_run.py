"""A new user's first run: the README's main command from a fresh clone and venv, timed.

Each run clones this checkout's HEAD into a temporary folder, makes a venv there, and times
the README's set-up command in its two parts:

- ``pip install -e .`` into the new venv (pip's download cache is the only thing reused:
  nothing is downloaded twice, everything is resolved and installed);
- ``agentunit-gym eval --env OS-v0 --env DB-v0 --env KG-v0 --env WebShop-v0`` with an empty
  cache folder (``AGENTUNIT_CACHE_DIR``): ``fresh``, every first-use step included (the KG
  store, the WebShop index, bytecode of the package);
- the same command again: ``cached``, what every later run costs.

The machine is shared, so each phase also records the load average when it started and its
CPU seconds (the venv's processes, less sensitive to the load than wall time); the summary
gives medians over the runs. The README's figures come from this file's output::

    python benchmarks/bench_first_run.py [--runs 3] [--python python3] [--ref HEAD] [--json PATH]

It measures a committed state (``git clone``, then ``--ref``, HEAD by default): commit first.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from timing import write_result

ROOT = Path(__file__).resolve().parents[1]
EVAL_ARGS = ("eval", "--env", "OS-v0", "--env", "DB-v0", "--env", "KG-v0", "--env", "WebShop-v0")
PIP_OPTIONS = ("--no-compile",)
"""The README's install options: ``--no-compile`` leaves bytecode to the first import of each module
(pip would compile every module of numpy, scipy and the rest at install, most never imported)."""
README_COMMAND = "pip install " + " ".join(PIP_OPTIONS) + " -e . && agentunit-gym " + " ".join(EVAL_ARGS)
PHASE_DEADLINE_S = 1800.0
PHASES = ("venv", "pip install", "eval fresh", "eval cached")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _phase(name: str, command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``command``, timed; raise with its output when it fails."""
    load = os.getloadavg()[0]
    cpu = _children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=PHASE_DEADLINE_S)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}): {' '.join(command)}\n{done.stdout[-2000:]}"
                         f"\n{done.stderr[-4000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(_children_cpu_s() - cpu, 2), "load_1min": round(load, 2)}


def one_run(python: str, work: Path, ref: str, pip_options: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """One fresh clone (at ``ref``), venv, install, fresh eval and cached eval under ``work``."""
    clone, cache, results = work / "clone", work / "cache", work / "results"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=PHASE_DEADLINE_S)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", ref], check=True, timeout=PHASE_DEADLINE_S)
    results.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AGENTUNIT_CACHE_DIR")}
    env["AGENTUNIT_CACHE_DIR"] = str(cache)
    venv = clone / ".venv"
    run: dict[str, dict[str, Any]] = {}
    run["venv"] = _phase("venv", [python, "-m", "venv", str(venv)], cwd=clone, env=env)
    run["pip install"] = _phase("pip install", [str(venv / "bin" / "pip"), "install", "-q", *pip_options, "-e", "."],
                                cwd=clone, env=env)
    cli = [str(venv / "bin" / "agentunit-gym"), *EVAL_ARGS]
    run["eval fresh"] = _phase("eval fresh", cli, cwd=results, env=env)
    run["eval cached"] = _phase("eval cached", cli, cwd=results, env=env)
    return run


def _median(runs: list[dict[str, dict[str, Any]]], phase: str, key: str) -> float:
    return round(statistics.median(r[phase][key] for r in runs), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--python", default="python3", help="the interpreter the new venv is made from")
    parser.add_argument("--ref", default="HEAD", help="the commit to measure (an earlier one for a before/after)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "first_run.json")
    parser.add_argument("--pip-options", default=" ".join(PIP_OPTIONS),
                        help=f"pip's install options (default the README's, {' '.join(PIP_OPTIONS)!r}; '' for none)")
    args = parser.parse_args()
    pip_options = tuple(args.pip_options.split())
    if README_COMMAND not in (ROOT / "README.md").read_text(encoding="utf-8"):
        raise SystemExit(f"README.md no longer gives {README_COMMAND!r}: update EVAL_ARGS to its main command.")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    if dirty:
        print("note: uncommitted changes are not measured (the clone is of HEAD)", file=sys.stderr)
    head = subprocess.run(["git", "rev-parse", "--short", args.ref], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    runs = []
    for index in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="first-run-"))
        try:
            runs.append(one_run(args.python, work, head, pip_options))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {index + 1}: " + ", ".join(f"{p} {runs[-1][p]['wall_s']} s" for p in PHASES), file=sys.stderr)
    median = {p: {k: _median(runs, p, k) for k in ("wall_s", "cpu_s", "load_1min")} for p in PHASES}
    result = {
        "benchmark": "first_run",
        "command": README_COMMAND,
        "pip_options": list(pip_options),
        "commit": head,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "runs": runs,
        "median": median,
        "fresh_total_s": round(statistics.median(
            r["venv"]["wall_s"] + r["pip install"]["wall_s"] + r["eval fresh"]["wall_s"] for r in runs), 2),
        "cached_eval_s": median["eval cached"]["wall_s"],
    }
    write_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
