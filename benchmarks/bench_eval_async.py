"""Asynchronous episodes against the lockstep loop, with a heavy-tailed model in the loop.

The agent replays the oracle's actions after a lognormal delay (median 0.5 s, sigma 0.8, as
hosted model endpoints behave), drawn from the episode's seed and turn, so every concurrency
sees the same delays for the same episode. ``--scale`` multiplies every delay (0.1: ten times
faster, for a quick look; the env's own time is not scaled, so a small scale makes the env
the bottleneck sooner).

For each backend (DB on sqlite, OS on the local sandbox, OS on docker, DB on mysql with one
shared server) and each concurrency C (1, 4, 16, 64, 256), the evaluator runs
``max(min_episodes, waves x C)`` episodes (capped by ``--max-episodes``), where ``waves`` is
``--target-waves`` (48) at the target concurrencies (16 and 64) and ``--waves`` (16)
elsewhere and for the baseline. Why more at the targets: with a lognormal tail, the last
episodes of a point keep even a zero-overhead scheduler under the ideal, by ~15% at
C = 64 with 16 waves and ~6% with 48 (the ``bound`` below), so a short point measures the
tail, not the schedule. Reports:

- ``speedup``: episodes per second over those at C = 1 (raw throughput ratio);
- ``work_speedup``: agent-seconds served per wall second over those at C = 1: the same
  ratio corrected for the mean delay of the episodes each point happened to draw (each
  point runs a different number of episodes, and a lognormal mean over 16 episodes is
  noisy); this is the figure held against the ideal, min(C, episodes);
- ``cpu_ms_per_episode`` and ``machine_busy_ms_per_episode``: CPU of this process (with its
  reaped children) and of the whole machine (/proc/stat: daemons, containers, servers and
  anything else running) per episode, to tell a CPU-bound point from a scheduling limit;
- ``bound``: what a scheduler with zero overhead reaches on the same delays (episodes
  handed in queue order to C workers, the env taking no time): the tail of the last
  episodes is in the ideal's way even then.

The naive baseline, measured in the same run: the lockstep loop over a threaded vector env
(benchmarks/lockstep.py, what ``--vector threads`` ran before the asynchronous engine became
the only one), where each turn waits for every agent in flight.

``--compare VARIANT`` (local only): each point is run twice back to back, as the code is and
as it was, so both see the same machine (for a machine whose speed drifts, or that other
jobs share): ``own_dev`` (``--compare-own-dev``), the agent's shell given a ``/dev`` of its
own on bubblewrap (the code of 2026-11-24 to 2026-11-26, before a reset in place put
``/dev/pts/ptmx`` back instead); ``exec_chain_before``, the one-off commands' exec chain
before 2026-11-26 16:00 (``env --chdir`` per command where ``nsenter --wdns`` is now,
``bwrap --help`` per agent shell); ``no_spawner``, one-off commands through that exec chain
instead of the box's spawner (``LocalSandbox(spawner=False)``); ``spawner_forks``, the
spawner as before 2026-11-27 (a fork of itself per one-off, where it now starts the command
without a copy).

Usage (from the repo root)::

    python benchmarks/bench_eval_async.py [--backends sqlite,local,docker,mysql]
        [--concurrency 1,4,16,64,256] [--waves 16] [--target-waves 48] [--scale 1.0] [--json PATH]
        [--compare own_dev|exec_chain_before|no_spawner|spawner_forks] [--variant-first]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import heapq
import json
import math
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from lockstep import run_lockstep_episodes
from timing import machine_busy_s, own_cpu_s

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.eval.agents.builtin import OracleAgent
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.work import list_tasks, plan
from agentunit_gym.eval.record.records import RunPaths, read_records
from agentunit_gym.eval.run.runner import run_episodes

MEDIAN_S = 0.5
SIGMA = 0.8
TARGET = 0.85
"""Share of the ideal speedup required at C = 16 and 64."""

BACKENDS = {"sqlite": ("DB-v0", "sqlite"), "local": ("OS-v0", "local"), "docker": ("OS-v0", "docker"),
            "mysql": ("DB-v0", "mysql")}


class DelayLedger:
    """Every delay the agents slept, per episode seed (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_episode: dict[int, float] = {}

    def add(self, seed: int, delay: float) -> None:
        with self._lock:
            self.by_episode[seed] = self.by_episode.get(seed, 0.0) + delay

    def clear(self) -> None:
        with self._lock:
            self.by_episode = {}


LEDGER = DelayLedger()


class LognormalOracle(OracleAgent):
    """The oracle, replying after a lognormal delay drawn from (episode seed, turn): an async agent."""

    scale = 1.0

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self._seed = int(info.get("seed", 0))
        self._turn = 0

    async def act(self, observation: str, info: dict[str, Any]) -> str:  # type: ignore[override]
        rng = np.random.default_rng([self._seed, self._turn])
        self._turn += 1
        delay = MEDIAN_S * math.exp(SIGMA * float(rng.standard_normal())) * self.scale
        LEDGER.add(self._seed, delay)
        await asyncio.sleep(delay)
        return OracleAgent.act(self, observation, info)


def greedy_makespan(durations: list[float], workers: int) -> float:
    """Makespan of handing ``durations`` in order to the first free of ``workers``."""
    free = [0.0] * workers
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def run_point(env: str, backend: str, concurrency: int, episodes: int, lockstep: bool,
              env_options: dict[str, Any]) -> dict[str, Any]:
    """One point: the engine, or (``lockstep``) the lockstep baseline over a threaded vector env."""
    probe = gym.make(f"AgentUnit/{env}", backend=backend, **env_options)
    tasks = list_tasks(probe)
    probe.close()
    n = min(len(tasks), episodes)
    runs = max(1, -(-episodes // n))
    config = EvalConfig(envs=(env,), backends=(backend,), agent="lognormal-oracle", n=n, runs=runs,
                        concurrency=concurrency, seed=1, env_options=env_options)
    LEDGER.clear()
    cpu0, busy0 = own_cpu_s(), machine_busy_s()
    with tempfile.TemporaryDirectory() as tmp:
        if lockstep:
            outcome = run_lockstep_episodes(config, LognormalOracle, "lognormal-oracle", Path(tmp), mode="threads")
        else:
            outcome = run_episodes(config, LognormalOracle, "lognormal-oracle", Path(tmp))
        records = read_records(RunPaths(Path(tmp)).episodes)
    cpu_s, busy_s = own_cpu_s() - cpu0, machine_busy_s() - busy0
    steady = outcome.elapsed_s - outcome.setup_s
    delays = dict(LEDGER.by_episode)
    agent_s = sum(delays.values())
    # The episodes' delays in the order the evaluator hands them out (the plan's order).
    queue = [delays.get(item.seed, 0.0) for item in plan(config, {config.envs[0]: tasks})]
    width = min(concurrency, len(records))
    return {"concurrency": concurrency, "vector": "threads" if lockstep else "async episodes", "episodes": len(records),
            "load_avg_1m": os.getloadavg()[0],
            "success_rate": sum(r.success for r in records) / max(1, len(records)),
            "seconds": steady, "setup_s": outcome.setup_s, "agent_s": agent_s,
            "episodes_per_s": len(records) / steady, "agent_s_per_s": agent_s / steady,
            "bound_s": greedy_makespan(queue, width), "ideal": width,
            "cpu_ms_per_episode": 1000 * cpu_s / max(1, len(records)),
            "machine_busy_ms_per_episode": 1000 * busy_s / max(1, len(records))}



TARGET_CS = (16, 64)
"""The concurrencies the target applies at."""


def _own_dev_argv() -> tuple[str, ...] | None:
    """The agent's bubblewrap prefix as it was before ptmx was put back on reset: a ``/dev`` of its own."""
    from agentunit_gym.backends.sandbox.local import isolation

    argv = isolation.bwrap_agent_argv()
    if argv is None:
        return None
    at = argv.index("--tmpfs", argv.index("/proc/tty/driver") + 2)  # the one for /dev/shm
    return (*argv[:at], "--dev", "/dev", *argv[at:])


@contextlib.contextmanager
def _own_dev() -> Iterator[None]:
    """The agent's shell given a ``/dev`` of its own (the code before ptmx was put back on reset)."""
    from agentunit_gym.backends.sandbox.local import shell as shell_module

    real = shell_module.bwrap_agent_argv
    shell_module.bwrap_agent_argv = _own_dev_argv  # type: ignore[assignment]
    try:
        yield
    finally:
        shell_module.bwrap_agent_argv = real  # type: ignore[assignment]


@contextlib.contextmanager
def _exec_chain_before() -> Iterator[None]:
    """The exec chain before 2026-11-26 16:00: ``env --chdir`` in front of every one-off
    command (now ``nsenter --wdns``), ``bwrap --help`` asked at every agent shell's start,
    and ``nsenter`` and the outer ``setpriv`` by bare name (each exec tried the ``PATH`` dirs
    in turn)."""
    from agentunit_gym.backends.sandbox.local import box as box_module
    from agentunit_gym.backends.sandbox.local import isolation

    saved = (box_module.nsenter_has_wdns, isolation._bwrap_has_chmod, isolation.tool_path, box_module.tool_path)

    def probe_every_time(tool: str) -> bool:
        isolation._KNOWN_OPTIONS.pop((tool, "--chmod"), None)
        return saved[1](tool)

    def by_name(name: str, default: str | None = None) -> str:
        return default or name

    box_module.nsenter_has_wdns = lambda tool: False  # type: ignore[assignment]
    isolation._bwrap_has_chmod = probe_every_time  # type: ignore[assignment]
    isolation.tool_path = box_module.tool_path = by_name  # type: ignore[assignment]
    try:
        yield
    finally:
        (box_module.nsenter_has_wdns, isolation._bwrap_has_chmod, isolation.tool_path,  # type: ignore[assignment]
         box_module.tool_path) = saved


@contextlib.contextmanager
def _no_spawner() -> Iterator[None]:
    """One-off commands through the exec chain (five execs each), as before the box's spawner
    (2026-11-26 18:40): every local sandbox made meanwhile gets ``spawner=False``."""
    from agentunit_gym.backends.sandbox.local import sandbox as sandbox_module

    cls = sandbox_module.LocalSandbox
    real = cls.__init__

    def without(self: Any, **kwargs: Any) -> None:
        real(self, **{**kwargs, "spawner": False})

    cls.__init__ = without  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__init__ = real  # type: ignore[method-assign]


@contextlib.contextmanager
def _spawner_forks() -> Iterator[None]:
    """The box's spawner as before 2026-11-27: a fork of itself per one-off command (its child
    enters the agent's namespaces and execs the command), where it now starts the command
    from itself, without a copy (subprocess's vfork)."""
    from agentunit_gym.backends.sandbox.local import spawner as spawner_module

    real = spawner_module.SOURCE
    direct = "self.direct = sys.version_info >= (3, 11)"
    assert direct in real, "the spawner's source changed: update this variant"
    spawner_module.SOURCE = real.replace(direct, "self.direct = False")
    try:
        yield
    finally:
        spawner_module.SOURCE = real


COMPARE = {"own_dev": _own_dev, "exec_chain_before": _exec_chain_before, "no_spawner": _no_spawner,
           "spawner_forks": _spawner_forks}
"""The variants ``--compare`` can run each point with, back to back with the code as it is."""


def run_variant_point(variant: str, env: str, backend: str, concurrency: int, episodes: int,
                      env_options: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_point` with the code of ``variant`` (:data:`COMPARE`)."""
    with COMPARE[variant]():
        row = run_point(env, backend, concurrency, episodes, None, env_options)
    row["variant"] = variant
    return row


def bench_backend(name: str, concurrencies: list[int], waves: int, target_waves: int, min_episodes: int,
                  max_episodes: int, baseline: list[int], compare: str | None = None,
                  variant_first: bool = False) -> dict[str, Any]:
    env, backend = BACKENDS[name]
    env_options: dict[str, Any] = {}
    server = None
    if name == "mysql":
        # One shared server for every env copy (a DSN), as a large run would use it: a server
        # container per copy at C = 64 would be 64 MariaDB processes on a 2-core machine.
        from urllib.parse import quote

        from agentunit_gym.backends.sql.mysql import MySQLBackend

        server = MySQLBackend()
        params = server.admin_connect_params()
        env_options["dsn"] = (f"mysql://{quote(params.user, safe='')}:{quote(params.password, safe='')}@localhost/"
                              f"?unix_socket={params.unix_socket}")
    rows: list[dict[str, Any]] = []
    try:
        for c in concurrencies:
            episodes = min(max_episodes, max(min_episodes, (target_waves if c in TARGET_CS else waves) * c))
            runs = [functools.partial(run_point, env, backend, c, episodes, False, env_options)]
            if compare is not None and name == "local":
                runs.append(functools.partial(run_variant_point, compare, env, backend, c, episodes, env_options))
            for run in runs if not variant_first else runs[::-1]:
                rows.append(run())
                _report(name, rows[-1], rows[0])
        for c in baseline:
            episodes = min(max_episodes, max(min_episodes, waves * c))
            rows.append(run_point(env, backend, c, episodes, True, env_options))
            _report(name, rows[-1], rows[0])
    finally:
        if server is not None:
            server.close()
    return {"env": env, "backend": backend, "rows": rows}


def _report(name: str, row: dict[str, Any], first: dict[str, Any]) -> None:
    row["speedup"] = row["episodes_per_s"] / first["episodes_per_s"]
    row["work_speedup"] = row["agent_s_per_s"] / first["agent_s_per_s"]
    row["share_of_ideal"] = row["work_speedup"] / row["ideal"]
    # Absolute: the share of C agents' time served, whatever C = 1 reached (share_of_ideal is over
    # the measured C = 1, whose env time inflates it; bound_share is over a C = 1 without any).
    row["agent_share"] = row["agent_s_per_s"] / row["ideal"]
    row["bound_share"] = (row["agent_s"] / row["bound_s"]) / row["ideal"] / (first["agent_s"] / first["bound_s"])
    print(f"  {name:<7} {row['vector']:<15} {row.get('variant', ''):<8} C={row['concurrency']:<4} "
          f"{row['episodes']:>5} ep {row['seconds']:7.1f} s "
          f"(setup {row['setup_s']:5.1f} s)  speedup {row['speedup']:6.1f}x  work {row['work_speedup']:6.1f}x "
          f"= {100 * row['share_of_ideal']:5.1f}% of {row['ideal']}  (zero-overhead bound "
          f"{100 * row['bound_share']:5.1f}%)  success {row['success_rate']:.2f}  load {row['load_avg_1m']:.1f}  "
          f"cpu/ep {row['cpu_ms_per_episode']:.0f} ms (machine {row['machine_busy_ms_per_episode']:.0f} ms)",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", default="sqlite,local,docker,mysql")
    parser.add_argument("--concurrency", default="1,4,16,64,256")
    parser.add_argument("--baseline", default="16,64", help="concurrencies of the lockstep baseline rows")
    parser.add_argument("--waves", type=int, default=16, help="episodes per point: waves x C")
    parser.add_argument("--target-waves", type=int, default=48,
                        help="waves at the target concurrencies (16 and 64)")
    parser.add_argument("--min-episodes", type=int, default=16)
    parser.add_argument("--max-episodes", type=int, default=4096)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every model delay")
    parser.add_argument("--container-max-c", type=int, default=64,
                        help="highest concurrency on docker and mysql (default 64: 256 containers on a shared "
                             "2-core daemon, or 512 connections to a server allowing 200, are not measured)")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/eval_async.json"))
    parser.add_argument("--compare", choices=sorted(COMPARE),
                        help="local: run each point also with the code of this variant, back to back: own_dev (the "
                             "agent's shell with a /dev of its own), exec_chain_before (env --chdir per one-off "
                             "command instead of nsenter --wdns, bwrap --help per shell), no_spawner (one-off "
                             "commands through the exec chain, not the box's spawner)")
    parser.add_argument("--compare-own-dev", action="store_const", const="own_dev", dest="compare",
                        help="the same as --compare own_dev")
    parser.add_argument("--variant-first", action="store_true",
                        help="with --compare: run the variant before the code as it is at each point (to see the "
                             "order's effect)")
    args = parser.parse_args(argv)
    LognormalOracle.scale = args.scale
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    baseline = [int(c) for c in args.baseline.split(",") if c]
    result: dict[str, Any] = json.loads(args.json.read_text()) if args.json.exists() else {}
    result.update({"benchmark": "eval_async", "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                   "agent": {"median_s": MEDIAN_S, "sigma": SIGMA, "scale": args.scale}, "waves": args.waves,
                   "target_waves": args.target_waves,
                   "target": TARGET})
    result.setdefault("backends", {})
    args.json.parent.mkdir(parents=True, exist_ok=True)
    for name in args.backends.split(","):
        mine = [c for c in concurrencies if name in ("sqlite", "local") or c <= args.container_max_c]
        result["backends"][name] = bench_backend(name, mine, args.waves, args.target_waves, args.min_episodes,
                                                 args.max_episodes, baseline, args.compare,
                                                 args.variant_first)
        result["backends"][name]["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        args.json.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
