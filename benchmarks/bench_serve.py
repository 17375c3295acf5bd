"""The env server under load, and what a step costs over loopback against in process.

1. **Load**: one ``agentunit-gym serve`` process per env (DB-v0 on sqlite, KG-v0 embedded)
   with ``--max-sessions 64``; 64 client threads, each holding one ``AgentUnit/Remote-v0``
   session, play episodes with the random agent (well-formed random tool calls) until
   ``--episodes`` (1,000) have finished. Any exception is an error; the target is none.
2. **Step cost**: the same non-committing step (``SELECT 1`` on DB-v0; a relation lookup on
   KG-v0) timed ``--steps`` times in process (``env.step``) and through one session on a
   server in another process (``remote.step``), in the same run. Reported as the p50
   difference and the ratio. Target: at most 2 ms p50 more than in process.

The server runs in its own process, as it would for rollout workers (the client threads
then do not share the server's interpreter). On a 2-core machine client and server share
the cores, so episode throughput is a floor.

Usage::

    python benchmarks/bench_serve.py [--episodes 1000] [--sessions 64] [--steps 2000] [--json PATH]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
from timing import summary, write_result

import agentunit_gym  # noqa: F401
from agentunit_gym.eval.agents.builtin import RandomAgent

ROOT = Path(__file__).resolve().parents[1]
CASES = {"DB-v0": "sqlite", "KG-v0": "embedded"}
STEP_ACTIONS = {
    "DB-v0": "Action: Operation\n```sql\nSELECT 1\n```",
    "KG-v0": '{"name": "get_relations", "arguments": {"variable": "m.0"}}',
}
TARGET_EXTRA_P50_MS = 2.0
READY_TIMEOUT_S = 120.0


@contextmanager
def server_process(env_id: str, backend: str, sessions: int, env_kwargs: str | None = None) -> Iterator[str]:
    """``agentunit-gym serve`` in a subprocess; yields its URL once it listens."""
    args = [sys.executable, "-m", "agentunit_gym", "serve", "--env", env_id, "--backend", backend, "--port", "0",
            "--max-sessions", str(sessions), "--warm", "8"]
    if env_kwargs:
        args += ["--env-kwargs", env_kwargs]
    environment = {k: v for k, v in os.environ.items() if k != "AGENTUNIT_GYM_TOKEN"}
    proc = subprocess.Popen(args, cwd=ROOT, env=environment, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    try:
        ready = lines.get(timeout=READY_TIMEOUT_S)
        found = re.search(r"on (http://\S+) ", ready)
        if found is None:
            raise RuntimeError(f"the server did not say where it listens: {ready!r}")
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def load(env_id: str, backend: str, sessions: int, episodes: int) -> dict[str, Any]:
    """``sessions`` threads, one Remote-v0 session each, play until ``episodes`` have ended."""
    claimed = 0
    lock = threading.Lock()
    errors: list[str] = []
    finished: collections.Counter[str] = collections.Counter()
    steps = 0
    episode_ms: list[float] = []

    def claim() -> int | None:
        nonlocal claimed
        with lock:
            if claimed >= episodes:
                return None
            claimed += 1
            return claimed

    def worker(url: str, start: threading.Barrier) -> None:
        nonlocal steps
        try:
            env = gym.make("AgentUnit/Remote-v0", url=url, timeout_s=120)
        except Exception as exc:  # noqa: BLE001 - counted as an error of the run
            with lock:
                errors.append(f"connect: {type(exc).__name__}: {exc}")
            start.abort()
            return
        agent = RandomAgent()
        try:
            start.wait(timeout=120)
            while (number := claim()) is not None:
                began = time.perf_counter()
                try:
                    observation, info = env.reset(seed=number)
                    agent.reset({**info, "seed": number})
                    done = False
                    taken = 0
                    while not done:
                        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
                        taken += 1
                        done = terminated or truncated
                except Exception as exc:  # noqa: BLE001 - counted as an error of the run
                    with lock:
                        errors.append(f"episode {number}: {type(exc).__name__}: {exc}")
                    continue
                with lock:
                    steps += taken
                    finished[str(info["finish_reason"].value)] += 1
                    episode_ms.append((time.perf_counter() - began) * 1000.0)
        finally:
            env.close()

    with server_process(env_id, backend, sessions) as url:
        start = threading.Barrier(sessions)
        threads = [threading.Thread(target=worker, args=(url, start)) for _ in range(sessions)]
        began = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(1800)
        wall = time.perf_counter() - began
    done = sum(finished.values())
    return {
        "env": env_id, "backend": backend, "sessions": sessions, "episodes": done, "errors": len(errors),
        "first_errors": errors[:5], "steps": steps, "wall_s": round(wall, 2),
        "episodes_per_s": round(done / wall, 1), "steps_per_s": round(steps / wall, 1),
        "episode": summary(episode_ms) if episode_ms else {}, "finish_reasons": dict(finished),
    }


def step_cost(env_id: str, backend: str, n: int) -> dict[str, Any]:
    """p50 of the same step in process and over loopback, measured alternately in one run."""
    action = STEP_ACTIONS[env_id]
    kwargs = '{"max_steps": 1000000}'
    local = gym.make(f"AgentUnit/{env_id}", backend=backend, max_steps=1_000_000)
    local.reset(seed=0)
    with server_process(env_id, backend, 2, env_kwargs=kwargs) as url:
        remote = gym.make("AgentUnit/Remote-v0", url=url)
        remote.reset(seed=0)
        for _ in range(50):  # warm both paths
            local.step(action)
            remote.step(action)
        here: list[float] = []
        there: list[float] = []
        for _ in range(n):  # alternate, so drift on a shared machine hits both sides alike
            t0 = time.perf_counter()
            local.step(action)
            t1 = time.perf_counter()
            remote.step(action)
            t2 = time.perf_counter()
            here.append((t1 - t0) * 1000.0)
            there.append((t2 - t1) * 1000.0)
        remote.close()
    local.close()
    local_s, remote_s = summary(here), summary(there)
    extra = remote_s["p50_ms"] - local_s["p50_ms"]
    return {
        "env": env_id, "backend": backend, "action": action, "in_process": local_s, "loopback": remote_s,
        "extra_p50_ms": round(extra, 3), "ratio_p50": round(remote_s["p50_ms"] / local_s["p50_ms"], 2),
        "target_extra_p50_ms": TARGET_EXTRA_P50_MS, "meets_target": extra <= TARGET_EXTRA_P50_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "serve.json")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load": [load(env_id, backend, args.sessions, args.episodes) for env_id, backend in CASES.items()],
        "step": [step_cost(env_id, backend, args.steps) for env_id, backend in CASES.items()],
    }
    write_result(result, args.json)
    if any(r["errors"] for r in result["load"]) or any(r["episodes"] < args.episodes for r in result["load"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
