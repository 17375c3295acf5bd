"""The evaluator's throughput, against naive evaluators measured in the same run.

Part 1, oracle over the suites (env-bound):
- ours: ``run_episodes`` (the real evaluator: the episode engine, traces, records) with the
  oracle at concurrency 1, 2 and 4 (each place the env copies can live, ``--vector``:
  ``threads``, in this process, the default; ``sync``, a one-env SyncVectorEnv per copy;
  ``async``, a one-env AsyncVectorEnv per copy, a process each), on the OS suite (docker
  backend) and the DB suite (mysql and sqlite backends);
- naive OS: sequential, a new container per episode, ``docker exec`` per init script,
  command and check script (what a straightforward harness does with the Docker SDK);
- naive DB: sequential, a new env per episode: on mysql a new server container per
  episode; on sqlite a new in-process database (already cheap: there for reference).

Part 2, simulated model latency (agent-bound): a local fake OpenAI-compatible server answers
after 500 ms; the chat agent plays the reference solution through it on OS (local) and DB
(sqlite). Sequential (concurrency 1) against concurrency 2, 4, 8, with the copies in each
of the three places.

Ratios, not absolute times: the machine is shared and noisy. Usage::

    python benchmarks/bench_eval.py [--part 1|2|all] [--episodes 24] [--naive-episodes 10] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.eval.agents.builtin import OracleAgent, resolve_agent
from agentunit_gym.eval.agents.fake_server import FakeChatServer, reference_responder
from agentunit_gym.eval.run.runner import EvalConfig, RunPaths, VectorMode, read_records, run_episodes

VECTOR_MODES: tuple[VectorMode, ...] = ("sync", "threads", "async")
OS_TARGET = 15.0
LATENCY_TARGET = 5.0  # AgentUnit reports ~5x from async execution


SUITE_RUNS = 3
"""Repeats per task when a whole suite is evaluated (the AgentUnit paper's N = 3)."""


def run_ours(env: str, backend: str, concurrency: int, episodes: int | None, *, agent: str = "oracle",
             vector: VectorMode = "sync", base_url: str | None = None) -> dict[str, Any]:
    """The real evaluator over ``episodes`` episodes (tasks cycled by repeats), or over the whole
    suite with SUITE_RUNS repeats when ``episodes`` is None; returns its rate."""
    probe = gym.make(f"AgentUnit/{env}", backend=backend)
    n_tasks = len(probe.unwrapped.tasks)  # type: ignore[attr-defined]
    probe.close()
    if episodes is None:
        n, runs = n_tasks, SUITE_RUNS
    else:
        n = min(n_tasks, episodes)
        runs = max(1, -(-episodes // n))
    config = EvalConfig(envs=(env,), backends=(backend,), agent=agent, n=n, runs=runs, concurrency=concurrency,
                        vector=vector, seed=1)
    if agent == "oracle":
        label, factory = "oracle", OracleAgent
    else:
        label, factory = resolve_agent(agent, base_url=base_url)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        outcome = run_episodes(config, factory, label, Path(tmp), env_factory=_env_factory)
        elapsed = time.perf_counter() - started
        records = read_records(RunPaths(Path(tmp)).episodes)
    ok = sum(r.success for r in records)
    steady = elapsed - outcome.setup_s
    # Two rates: over the whole run, and without env start-up (containers, servers), which a
    # long run amortises and which the naive evaluators pay per episode instead.
    return {"episodes": len(records), "seconds": elapsed, "setup_s": outcome.setup_s,
            "episodes_per_s": len(records) / elapsed, "steady_episodes_per_s": len(records) / steady,
            "success_rate": ok / max(1, len(records)), "steps": sum(r.steps for r in records)}


def _env_factory(env_id: str, options: dict[str, Any]) -> gym.Env[str, str]:
    from agentunit_gym.eval.run.runner import default_env_factory

    return default_env_factory(env_id, options)


# ------------------------------------------------------------------ naive evaluators


def naive_os(episodes: int) -> dict[str, Any]:
    """Sequential: a container per episode, ``docker exec`` per init script, command and check
    (the same naive episode as benchmarks/bench_os_episodes.py)."""
    from bench_os_episodes import naive_episode

    from agentunit_gym.backends import process
    from agentunit_gym.backends.images import ensure_image
    from agentunit_gym.core.registry import get_domain
    from agentunit_gym.domains.os.task import OSTask

    tasks = [t for t in get_domain("os").bundled_tasks() if isinstance(t, OSTask) and t.supports("docker")]
    client = process.docker_client(timeout=120.0)
    image = ensure_image("os", client=client)
    naive_episode(client, image, tasks[0])  # warm-up, not timed
    picked = [tasks[i % len(tasks)] for i in range(episodes)]
    started = time.perf_counter()
    rewards = [naive_episode(client, image, t) for t in picked]
    elapsed = time.perf_counter() - started
    client.close()
    return {"episodes": len(rewards), "seconds": elapsed, "episodes_per_s": len(rewards) / elapsed,
            "success_rate": sum(rewards) / len(rewards)}


def naive_db(episodes: int, backend: str = "sqlite") -> dict[str, Any]:
    """Sequential: a new env (and database backend) per episode, the oracle's steps, then close."""
    probe = gym.make("AgentUnit/DB-v0", backend=backend)
    tasks = list(probe.unwrapped.tasks)  # type: ignore[attr-defined]
    probe.close()
    picked = [tasks[i % len(tasks)] for i in range(episodes)]
    rewards = []
    started = time.perf_counter()
    for task in picked:
        env = gym.make("AgentUnit/DB-v0", backend=backend)
        env.reset(options={"task_id": task.id})
        reward = 0.0
        for step in task.reference_solution:
            _, reward, term, trunc, _ = env.step(env.unwrapped.render_action(step))  # type: ignore[attr-defined]
            if term or trunc:
                break
        rewards.append(float(reward))
        env.close()
    elapsed = time.perf_counter() - started
    return {"episodes": len(rewards), "seconds": elapsed, "episodes_per_s": len(rewards) / elapsed,
            "success_rate": sum(rewards) / len(rewards)}


# ----------------------------------------------------------------------- parts


def part_oracle(episodes: int | None, naive_episodes: int, concurrencies: list[int]) -> dict[str, Any]:
    """OS on docker against a container per episode; DB on mysql against a server container
    per episode; DB on sqlite (no naive counterpart: a new in-process database per episode
    is what it already does) for reference."""
    out: dict[str, Any] = {}
    for env, backend, naive in (("OS-v0", "docker", lambda: naive_os(naive_episodes)),
                                ("DB-v0", "mysql", lambda: naive_db(max(3, naive_episodes // 2), "mysql")),
                                ("DB-v0", "sqlite", lambda: naive_db(naive_episodes, "sqlite"))):
        rows: dict[str, Any] = {"naive": naive()}
        rows["naive"]["steady_episodes_per_s"] = rows["naive"]["episodes_per_s"]
        rows["ours c=1"] = run_ours(env, backend, 1, episodes)
        for c in concurrencies[1:]:
            for vector in VECTOR_MODES:
                rows[f"ours c={c} {vector}"] = run_ours(env, backend, c, episodes, vector=vector)
        for row in rows.values():
            row["ratio_vs_naive"] = row["episodes_per_s"] / rows["naive"]["episodes_per_s"]
            row["steady_ratio_vs_naive"] = row["steady_episodes_per_s"] / rows["naive"]["episodes_per_s"]
        out[f"{env} ({backend})"] = rows
    return out


def part_latency(episodes: int, latency: float, concurrencies: list[int]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for env, backend in (("OS-v0", "local"), ("DB-v0", "sqlite")):
        probe = gym.make(f"AgentUnit/{env}", backend=backend)
        base: Any = probe.unwrapped
        table.update({t.instruction: [(s.tool, base.codec.arguments_of(s), base.render_action(s))
                                      for s in t.reference_solution] for t in base.tasks})
        probe.close()
    out: dict[str, Any] = {}
    with FakeChatServer(reference_responder(table), latency_s=latency) as server:
        for env, backend in (("OS-v0", "local"), ("DB-v0", "sqlite")):
            rows: dict[str, Any] = {}
            rows["sequential"] = run_ours(env, backend, 1, episodes, agent="openai:fake", base_url=server.base_url)
            for c in concurrencies:
                for vector in VECTOR_MODES:
                    rows[f"c={c} {vector}"] = run_ours(env, backend, c, episodes, agent="openai:fake",
                                                       vector=vector, base_url=server.base_url)  # type: ignore[arg-type]
            for row in rows.values():
                row["speedup_vs_sequential"] = row["episodes_per_s"] / rows["sequential"]["episodes_per_s"]
            out[f"{env} ({backend})"] = rows
    return out


def _print(title: str, rows: dict[str, Any], ratio_key: str) -> None:
    print(f"\n{title}")
    steady = "steady_" + ratio_key if any("steady_" + ratio_key in r for r in rows.values()) else None
    print(f"  {'run':<20} {'episodes':>8} {'seconds':>8} {'setup s':>8} {'ep/s':>8} {'success':>8} {'ratio':>7}"
          + (f" {'steady':>7}" if steady else ""))
    for name, row in rows.items():
        print(f"  {name:<20} {row['episodes']:>8} {row['seconds']:>8.2f} {row.get('setup_s', 0.0):>8.2f} "
              f"{row['episodes_per_s']:>8.2f} {row['success_rate']:>8.2f} {row[ratio_key]:>6.1f}x"
              + (f" {row[steady]:>6.1f}x" if steady else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--part", choices=["1", "2", "all"], default="all")
    parser.add_argument("--episodes", type=int, default=None,
                        help="episodes per configuration of ours (default: the whole suite, 3 runs per task)")
    parser.add_argument("--naive-episodes", type=int, default=10, help="episodes of the naive evaluators")
    parser.add_argument("--latency", type=float, default=0.5, help="simulated model latency, seconds")
    parser.add_argument("--latency-episodes", type=int, default=16)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/eval.json"))
    args = parser.parse_args(argv)
    # A partial run (--part) keeps the other part's results already in the file.
    result: dict[str, Any] = json.loads(args.json.read_text()) if args.json.exists() else {}
    result.update({"benchmark": "eval", "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}})
    args.json.parent.mkdir(parents=True, exist_ok=True)
    if args.part in ("1", "all"):
        result["oracle"] = part_oracle(args.episodes, args.naive_episodes, [1, 2, 4])
        result["oracle_measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        args.json.write_text(json.dumps(result, indent=2))
        for name, rows in result["oracle"].items():
            _print(f"oracle, {name}: ours vs naive", rows, "ratio_vs_naive")
    if args.part in ("2", "all"):
        result["latency"] = part_latency(args.latency_episodes, args.latency, [2, 4, 8])
        result["latency_measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        args.json.write_text(json.dumps(result, indent=2))
        for name, rows in result["latency"].items():
            _print(f"simulated {args.latency:g} s model latency, {name}: vs sequential", rows,
                   "speedup_vs_sequential")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
