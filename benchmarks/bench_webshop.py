"""WebShop shop engine: first index build, cold start with the index cached, search latency, peak RSS.

For each catalog size (100k, the bundled suite's catalog; with ``--large`` also 1.2M, the
size of WebShop's own catalog, generated):

- **first build**: generate every product and build the bm25s index into an empty cache
  (a progress bar on stderr), in a fresh process; its peak RSS.
- **cold start**: a fresh process that imports agentunit-gym, makes ``AgentUnit/WebShop-v0``
  over that catalog and resets it (index cached, memory-mapped): wall time to the first
  observation, then ``--queries`` searches and ``--episodes`` oracle-style episodes, and
  the process's peak RSS.
- **search**: p50/p90 of ``Shop.search`` for queries built like an agent's (product type,
  attributes, option values), in that process.

The naive baseline in the same run is a start without the cache (building the index
every time, as a harness that does not save it would): the verdict is the ratio
first build / cold start. Targets (issue 12): search p50 <= 5 ms on 100k products, cold
start <= 3 s, peak RSS <= 1 GB. WebShop's own server needs ~15 GB and ~3 minutes.

Usage::

    python benchmarks/bench_webshop.py [--large] [--queries 1000] [--episodes 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_SEARCH_P50_MS = 5.0
TARGET_COLD_START_S = 3.0
TARGET_RSS_MB = 1024.0

_BUILD = """
import json, resource, sys, time
from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.search import SearchIndex
size = int(sys.argv[1])
catalog = GeneratedCatalog(size)
last = [0]
def progress(done, total):
    pct = done * 100 // total
    if pct != last[0]:
        last[0] = pct
        bar = "#" * (pct // 2)
        print(f"\\rbuilding {size} products [{bar:<50}] {pct:3d}%", end="", file=sys.stderr, flush=True)
start = time.perf_counter()
SearchIndex.open(catalog, progress=progress)
print(file=sys.stderr)
print(json.dumps({"build_s": time.perf_counter() - start,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_COLD = """
import time
t0 = time.perf_counter()
import json, random, resource, statistics, sys
import gymnasium as gym
import agentunit_gym
size, queries, episodes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t_import = time.perf_counter() - t0
env = gym.make("AgentUnit/WebShop-v0", catalog_size=size).unwrapped
obs, info = env.reset(seed=0)
t_first = time.perf_counter() - t0
shop = env.shop_backend.shop
from agentunit_gym.backends.shop.taxonomy import TYPES
rng = random.Random(7)
texts = []
for _ in range(queries):
    kind = rng.choice(TYPES)
    words = [kind.name, *rng.sample(kind.attributes, 2)]
    group = rng.choice(sorted(kind.options))
    words.append(rng.choice(kind.options[group]))
    texts.append(" ".join(words))
samples = []
for text in texts:
    s = time.perf_counter()
    hits = shop.search(text)
    samples.append((time.perf_counter() - s) * 1000)
    assert hits, text
samples.sort()
steps = 0
s = time.perf_counter()
tasks = env.tasks[:episodes] if size == 100_000 else []
for task in tasks:
    env.reset(options={"task_id": task.id})
    for step in task.reference_solution:
        obs, reward, *_ = env.step(env.render_action(step))
        steps += 1
    assert reward == 1.0, task.id
episode_s = time.perf_counter() - s
print(json.dumps({
    "import_s": t_import, "first_observation_s": t_first,
    "search": {"n": len(samples), "p50_ms": statistics.median(samples),
               "p90_ms": samples[int(0.9 * len(samples))], "max_ms": samples[-1]},
    "oracle_episodes": len(tasks), "oracle_step_ms": episode_s / steps * 1000 if steps else None,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def run_python(code: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True,
                          timeout=3600, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def measure(size: int, queries: int, episodes: int, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "AGENTUNIT_CACHE_DIR": str(cache)}
    build = run_python(_BUILD, [str(size)], env)
    cold = run_python(_COLD, [str(size), str(queries), str(episodes)], env)
    return {
        "size": size,
        "first_build": build,
        "cold_start": cold,
        "ratio_build_over_cold_start": build["process_s"] / cold["first_observation_s"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", action="store_true", help="also measure 1.2M products (WebShop's size)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [100_000] + ([1_200_000] if args.large else [])
    results: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                               "date": time.strftime("%Y-%m-%d"), "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-webshop-") as tmp:
        for size in sizes:
            run = measure(size, args.queries, args.episodes, Path(tmp))
            results["runs"].append(run)
            cold = run["cold_start"]
            print(f"{size:>9} products: first build {run['first_build']['build_s']:.1f} s "
                  f"(peak RSS {run['first_build']['peak_rss_mb']:.0f} MB); cold start to first observation "
                  f"{cold['first_observation_s']:.2f} s (import {cold['import_s']:.2f} s); search p50 "
                  f"{cold['search']['p50_ms']:.2f} ms p90 {cold['search']['p90_ms']:.2f} ms; peak RSS "
                  f"{cold['peak_rss_mb']:.0f} MB; build/cold start {run['ratio_build_over_cold_start']:.1f}x")
    main_run = results["runs"][0]["cold_start"]
    results["targets"] = {
        "search_p50_ms_max": TARGET_SEARCH_P50_MS, "cold_start_s_max": TARGET_COLD_START_S,
        "peak_rss_mb_max": TARGET_RSS_MB,
        "met": main_run["search"]["p50_ms"] <= TARGET_SEARCH_P50_MS
        and main_run["first_observation_s"] <= TARGET_COLD_START_S and main_run["peak_rss_mb"] <= TARGET_RSS_MB,
    }
    print(f"targets met on 100k: {results['targets']['met']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
