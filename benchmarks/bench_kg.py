"""KG env speed: tool-call latency on a graph of at least 1M triples, HTTP overhead, cold start, store build.

- ``graph``: the bundled graph (~375k triples) plus ``--copies`` renamed copies of it (every
  entity id gets a ``_cN`` suffix), so the store holds ``(copies + 1) x 375k`` triples with the
  bundled questions' entities in it. Its store is built once (timed: ``build_s``) and cached
  under ``~/.cache/agentunit-gym/kg/`` like the bundled one.
- ``tool_call_embedded``: every tool call of the bundled suite's reference solutions, run
  through the env's tool layer (``KGSession.call``, which evaluates the variables it needs)
  on the embedded store, repeated ``--rounds`` times; p50/p90 per call.
- ``tool_call_http``: the same calls against Oxigraph's SPARQL server over the same store on
  loopback; ``http_overhead_p50_ms`` is the p50 difference, and ``http_roundtrip`` the bare
  round trip of a trivial query (the floor per request).
- ``cold_start``: a fresh interpreter that makes ``AgentUnit/KG-v0`` and resets it (store
  already cached), against a fresh interpreter that only imports the package (the baseline).
- ``bundled_build_s``: building the bundled store from scratch in a temporary cache root.

Targets: tool call p50 <= 1 ms embedded, cold start <= 2 s.

Usage::

    python benchmarks/bench_kg.py [--copies 2] [--rounds 3] [--json PATH]
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from timing import summary

from agentunit_gym.backends.sparql.base import SPARQLBackend
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL, build_store
from agentunit_gym.backends.sparql.http import HTTPSPARQL
from agentunit_gym.domains.kg.domain import DOMAIN
from agentunit_gym.domains.kg.graph import GraphSource, bundled_source
from agentunit_gym.domains.kg.task import KGTask, split_call
from agentunit_gym.domains.kg.tools import KGSession, ToolFailure, Vocabulary

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.backends.oxigraph_server import OxigraphServer  # noqa: E402 - the repo root is on the path now


def big_source(copies: int) -> GraphSource:
    """The bundled graph plus ``copies`` copies with renamed entities."""
    base = bundled_source()

    def lines() -> Iterator[str]:
        original = list(base.ntriples())
        yield from original
        for n in range(1, copies + 1):
            suffix = f"_c{n}"
            for line in original:
                # Entity ids are the only IRIs with "/ns/m." in them; properties keep their names.
                parts = line.split(" ", 2)
                subject = parts[0].replace(">", suffix + ">") if "/ns/m." in parts[0] else parts[0]
                rest = parts[2]
                if rest.startswith("<") and "/ns/m." in rest.split(" ", 1)[0]:
                    obj, tail = rest.split(" ", 1)
                    rest = obj.replace(">", suffix + ">") + " " + tail
                yield f"{subject} {parts[1]} {rest}"

    return GraphSource(f"{base.key}-x{copies + 1}", f"bundled x{copies + 1}", lines)


def calls(tasks: list[KGTask]) -> list[tuple[KGTask, list[tuple[str, list[str]]]]]:
    return [(t, [split_call(a) for a in t.actions]) for t in tasks]


def time_calls(backend: SPARQLBackend, plan: list[tuple[KGTask, list[tuple[str, list[str]]]]],
               rounds: int) -> list[float]:
    samples: list[float] = []
    for _ in range(rounds):
        for task, steps in plan:
            session = KGSession(backend, task.entities, Vocabulary.bundled(), timeout=30.0, max_results=100_000)
            for name, arguments in steps:
                started = time.perf_counter()
                try:
                    session.call(name, arguments)
                except ToolFailure as failure:
                    raise SystemExit(f"{task.id}: {name}{arguments} failed: {failure.text}") from failure
                samples.append((time.perf_counter() - started) * 1000.0)
            started = time.perf_counter()
            session.answer(session.variables[-1])  # committing evaluates the last variable: count it too
            samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def cold_start(repeat: int) -> dict[str, Any]:
    env_code = ("import time; t=time.perf_counter(); import gymnasium as gym, agentunit_gym; "
                "e=gym.make('AgentUnit/KG-v0'); e.reset(seed=0); e.close(); print(time.perf_counter()-t)")
    base_code = "import time; t=time.perf_counter(); import gymnasium, agentunit_gym; print(time.perf_counter()-t)"
    env_s, base_s = [], []
    for _ in range(repeat):
        env_s.append(float(subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True,
                                          check=True, timeout=120).stdout.strip().splitlines()[-1]))
        base_s.append(float(subprocess.run([sys.executable, "-c", base_code], capture_output=True, text=True,
                                           check=True, timeout=120).stdout.strip().splitlines()[-1]))
    return {"env_make_and_reset_s": sorted(env_s)[len(env_s) // 2], "import_only_s": sorted(base_s)[len(base_s) // 2],
            "samples_env_s": env_s, "samples_import_s": base_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=2, help="renamed copies added to the bundled graph")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the suite's tool calls")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "kg.json")
    args = parser.parse_args()

    results: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    source = big_source(args.copies)
    started = time.perf_counter()
    path = build_store(source.key, source.ntriples)
    results["build_s_or_cached"] = time.perf_counter() - started
    tasks = [t for t in DOMAIN.bundled_tasks() if isinstance(t, KGTask)]
    plan = calls(tasks)
    with EmbeddedSPARQL(path) as store:
        results["triples"] = store.triple_count()
        results["tool_call_embedded"] = summary(time_calls(store, plan, args.rounds))
    with OxigraphServer(path) as server, HTTPSPARQL(server.endpoint) as http:
        results["http_roundtrip"] = summary([_roundtrip(http) for _ in range(200)])
        results["tool_call_http"] = summary(time_calls(http, plan, args.rounds))
    results["http_overhead_p50_ms"] = results["tool_call_http"]["p50_ms"] - results["tool_call_embedded"]["p50_ms"]
    results["cold_start"] = cold_start(5)
    with tempfile.TemporaryDirectory() as tmp:
        bundled = bundled_source()
        started = time.perf_counter()
        build_store(bundled.key, bundled.ntriples, root=Path(tmp))
        results["bundled_build_s"] = time.perf_counter() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in results.items() if k != "cold_start"}, indent=2))
    print(json.dumps({k: v for k, v in results["cold_start"].items() if not k.startswith("samples")}, indent=2))
    return 0


def _roundtrip(http: HTTPSPARQL) -> float:
    started = time.perf_counter()
    http.select("SELECT (1 AS ?one) WHERE {}", timeout=10, limit=1)
    return (time.perf_counter() - started) * 1000.0


if __name__ == "__main__":
    raise SystemExit(main())
