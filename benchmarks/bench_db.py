"""Per-episode overhead of the SQL backends, against baselines measured in the same run.

One episode = create the episode database, load a table of ``--rows`` rows (AgentBench-
sized: ~50), run one agent statement, compute the AgentBench table hash, drop everything.

- ``mysql``: our backend, one MariaDB container reused across episodes (a database and a
  user per episode, socket, SSL off), with its default warm spares: episode accounts (user,
  empty database, agent connection) kept ready by a worker thread, and an ended episode's
  account renewed there for a later one (session reset, database dropped and created again).
- ``mysql_named``: the same with a database name given per episode, as AgentBench's tasks do
  (the spare's user and connection are used, the named database created on the spot and the
  user's grant moved to it; after, the worker revokes it, drops the database and gives the
  account its own empty database back: renewed too).
- ``mysql_no_spares``: the same backend with ``spares=0``: every account made and dropped
  inside the episode (the behaviour before issue 24).
- ``sqlite``: the embedded backend (a private in-memory database per episode).
- ``baseline``: what a straightforward harness does, a new server container per episode
  (start it, wait until it answers, create, load, hash, drop, remove the container).
- ``shared_baseline``: the honest baseline, one shared server (the same container as
  ``mysql``) and a plain harness on one pymysql connection: ``CREATE DATABASE`` + ``CREATE
  TABLE`` + load (``executemany``) + the statement + the hash query + ``DROP DATABASE`` per
  episode. It skips what our backend adds for isolation (a user per episode that can only
  touch its database, and the agent's own connection), so it is a floor, not a straw man.

Episodes run back to back (the spare's worker has no idle time to hide in, the worst case for
it), and the mysql variants and the shared baseline take turns in ``--rounds`` rounds so that
the machine's load, which drifts on a shared machine, falls on all of them alike. Verdicts
are ratios of p50s: shared baseline / mysql (target >= 1.0: our isolated episode at least as
fast as the bare harness) and server-per-episode baseline / mysql (target >= 10x); the
spread of the per-round ratio is reported too. ``throughput`` compares the wall time of all
of a variant's episodes, the worker's drops included (``settle`` at the end of each round).
The ``_paused`` variants of mysql and the shared baseline leave ``--pause-ms`` (untimed)
between episodes, as an agent's turns do in real use: the worker then has time of its own.

Usage::

    python benchmarks/bench_db.py [--episodes 200] [--rounds 10] [--pause-ms 20] [--baseline-episodes 5]
                                  [--rows 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymysql
from timing import summary, timed

from agentunit_gym.backends.sql.base import Column, SQLBackend, TableData
from agentunit_gym.backends.sql.hashing import mysql_table_hash_sql, quote_mysql_identifier
from agentunit_gym.backends.sql.mysql import MySQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend

TARGET_P50_MS = 30.0
TARGET_RATIO = 10.0
TARGET_SHARED_RATIO = 1.0


def make_table(rows: int) -> TableData:
    """A table shaped like AgentBench's: a handful of TEXT columns of short strings."""
    columns = (Column("name"), Column("country"), Column("population"), Column("area"), Column("note"))
    data = tuple((f"City {i}", f"Country {i % 17}", str(10_000 + i * 137), f"{i * 1.5:.1f}", None if i % 5 else "é")
                 for i in range(rows))
    return TableData("cities", columns, data)


def one_episode(backend: SQLBackend, table: TableData, database: str | None = None) -> None:
    db = backend.open_episode([table], database=database)
    try:
        result = db.execute("UPDATE cities SET note = 'x' WHERE name = 'City 3'")
        if result.rowcount != 1:
            raise RuntimeError(f"the benchmark's statement misbehaved: {result}")
        digest = db.table_hash(table.name, [c.name for c in table.columns])
        if len(digest) != 32:
            raise RuntimeError(f"unexpected table hash {digest!r}")
    finally:
        db.close()


class SharedServerHarness:
    """The plain harness on one shared server: one pymysql connection, a database per episode."""

    def __init__(self, backend: MySQLBackend) -> None:
        # The benchmark borrows the server our backend started (same image, same settings);
        # its connection details are internal to the backend.
        params = backend._params  # noqa: SLF001
        self.conn = pymysql.connect(user=params.user, password=params.password, host=params.host,
                                    port=params.port, unix_socket=params.unix_socket, autocommit=True,
                                    charset="utf8mb4")
        self.count = 0

    def episode(self, table: TableData) -> None:
        self.count += 1
        name = f"plain_{os.getpid()}_{self.count}"
        cols = ", ".join(f"{quote_mysql_identifier(c.name)} TEXT" for c in table.columns)
        marks = ", ".join(["%s"] * len(table.columns))
        with self.conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {quote_mysql_identifier(name)}")
            try:
                cur.execute(f"USE {quote_mysql_identifier(name)}")
                cur.execute(f"CREATE TABLE {quote_mysql_identifier(table.name)} ({cols})")
                cur.executemany(f"INSERT INTO {quote_mysql_identifier(table.name)} VALUES ({marks})", table.rows)
                if cur.execute("UPDATE cities SET note = 'x' WHERE name = 'City 3'") != 1:
                    raise RuntimeError("the baseline's statement misbehaved")
                cur.execute("SET SESSION group_concat_max_len = 1024")
                cur.execute(mysql_table_hash_sql(name, table.name, [c.name for c in table.columns]))
                (digest,) = cur.fetchone()
                if digest is None or len(digest) != 32:
                    raise RuntimeError(f"unexpected table hash {digest!r}")
            finally:
                cur.execute(f"DROP DATABASE {quote_mysql_identifier(name)}")

    def close(self) -> None:
        self.conn.close()


def paced(fn: Callable[[], None], repeat: int, pause_s: float) -> list[float]:
    """Like ``timed``, with an untimed pause before each episode (the agent's turns, which
    in real use last from hundreds of milliseconds to seconds)."""
    samples = []
    for _ in range(repeat):
        time.sleep(pause_s)
        samples += timed(fn, 1)
    return samples


def run(episodes: int, rounds: int, baseline_episodes: int, rows: int, pause_ms: float) -> dict[str, Any]:
    table = make_table(rows)
    results: dict[str, Any] = {}
    per_round = max(1, episodes // rounds)
    # Server start (and image build on first use) is not timed. The two backends share nothing
    # but the machine: each its own container, so one's worker cannot help the other.
    mysql = MySQLBackend()
    no_spares = MySQLBackend(spares=0)
    plain = SharedServerHarness(mysql)
    names = iter(range(10**9))
    variants: dict[str, Callable[[], None]] = {
        "mysql": lambda: one_episode(mysql, table),
        "mysql_named": lambda: one_episode(mysql, table, database=f"bench_named_{next(names)}"),
        "mysql_no_spares": lambda: one_episode(no_spares, table),
        "shared_baseline": lambda: plain.episode(table),
    }
    samples: dict[str, list[float]] = {key: [] for key in variants}
    walls: dict[str, float] = dict.fromkeys(variants, 0.0)
    paused: dict[str, list[float]] = {"mysql": [], "shared_baseline": []}
    round_ratios: list[float] = []
    try:
        for fn in variants.values():
            timed(fn, 10)  # warm-up
        mysql.settle()
        for _ in range(rounds):
            p50s = {}
            for key, fn in variants.items():
                start = time.perf_counter()
                got = timed(fn, per_round)
                mysql.settle()  # the worker's drops count in the wall time, not in the next variant's
                walls[key] += time.perf_counter() - start
                samples[key] += got
                p50s[key] = statistics.median(got)
            round_ratios.append(p50s["shared_baseline"] / p50s["mysql"])
            for key in paused:
                paused[key] += paced(variants[key], per_round, pause_ms / 1000.0)
                mysql.settle()
        for key in variants:
            results[key] = summary(samples[key])
        for key in paused:
            results[f"{key}_paused"] = summary(paused[key])
        results["server_version"] = mysql.server_version
    finally:
        plain.close()
        no_spares.close()
        mysql.close()
    sqlite = SQLiteBackend()
    try:
        timed(lambda: one_episode(sqlite, table), 10)
        results["sqlite"] = summary(timed(lambda: one_episode(sqlite, table), episodes))
    finally:
        sqlite.close()

    def naive() -> None:
        server = MySQLBackend(spares=0)
        try:
            one_episode(server, table)
        finally:
            server.close()

    results["baseline"] = summary(timed(naive, baseline_episodes))
    results["ratio_baseline_over_mysql"] = results["baseline"]["p50_ms"] / results["mysql"]["p50_ms"]
    results["ratio_shared_baseline_over_mysql"] = results["shared_baseline"]["p50_ms"] / results["mysql"]["p50_ms"]
    results["ratio_shared_baseline_over_mysql_named"] = (results["shared_baseline"]["p50_ms"]
                                                         / results["mysql_named"]["p50_ms"])
    results["ratio_shared_baseline_over_mysql_no_spares"] = (results["shared_baseline"]["p50_ms"]
                                                             / results["mysql_no_spares"]["p50_ms"])
    results["pause_ms"] = pause_ms
    results["ratio_shared_baseline_over_mysql_paused"] = (results["shared_baseline_paused"]["p50_ms"]
                                                          / results["mysql_paused"]["p50_ms"])
    results["round_ratios_shared_baseline_over_mysql"] = {
        "rounds": rounds, "episodes_per_round": per_round, "min": min(round_ratios),
        "median": statistics.median(round_ratios), "max": max(round_ratios)}
    results["throughput_ms_per_episode"] = {key: wall * 1000.0 / (rounds * per_round) for key, wall in walls.items()}
    results["targets"] = {"mysql_p50_ms_max": TARGET_P50_MS, "ratio_min": TARGET_RATIO,
                          "shared_ratio_min": TARGET_SHARED_RATIO,
                          "met": results["mysql"]["p50_ms"] <= TARGET_P50_MS
                          and results["ratio_baseline_over_mysql"] >= TARGET_RATIO
                          and results["ratio_shared_baseline_over_mysql"] >= TARGET_SHARED_RATIO}
    return results


def print_table(results: dict[str, Any]) -> None:
    print(f"{'backend':<36}{'n':>5}{'p50 ms':>10}{'p90 ms':>10}{'mean ms':>10}")
    labels = {"mysql": "mysql (server reused, warm spare)", "mysql_named": "mysql, named database",
              "mysql_no_spares": "mysql, spares=0", "sqlite": "sqlite (in process)",
              "baseline": "baseline (new container/episode)", "shared_baseline": "baseline (shared server, plain)",
              "mysql_paused": f"mysql, {results['pause_ms']:g} ms between", "shared_baseline_paused":
              f"shared baseline, {results['pause_ms']:g} ms between"}
    for key, label in labels.items():
        s = results[key]
        print(f"{label:<36}{s['n']:>5}{s['p50_ms']:>10.2f}{s['p90_ms']:>10.2f}{s['mean_ms']:>10.2f}")
    print(f"baseline / mysql (p50): {results['ratio_baseline_over_mysql']:.0f}x "
          f"(target >= {TARGET_RATIO:g}x); mysql p50 target <= {TARGET_P50_MS:g} ms")
    spread = results["round_ratios_shared_baseline_over_mysql"]
    print(f"shared-server baseline / mysql (p50): {results['ratio_shared_baseline_over_mysql']:.2f}x "
          f"(target >= {TARGET_SHARED_RATIO:g}x; per round {spread['min']:.2f}-{spread['max']:.2f}x); "
          f"named: {results['ratio_shared_baseline_over_mysql_named']:.2f}x; "
          f"spares=0: {results['ratio_shared_baseline_over_mysql_no_spares']:.2f}x; "
          f"with {results['pause_ms']:g} ms between episodes: "
          f"{results['ratio_shared_baseline_over_mysql_paused']:.2f}x")
    walls = results["throughput_ms_per_episode"]
    print("wall time per episode, worker's drops included: "
          + ", ".join(f"{key} {value:.2f} ms" for key, value in walls.items()))
    print(f"targets {'met' if results['targets']['met'] else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200, help="timed episodes per backend (default 200)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds the mysql variants and the shared "
                        "baseline take turns in (default 10)")
    parser.add_argument("--baseline-episodes", type=int, default=5, help="episodes for the baseline (default 5)")
    parser.add_argument("--pause-ms", type=float, default=20.0, help="untimed pause between episodes in the "
                        "paused variants (default 20)")
    parser.add_argument("--rows", type=int, default=50, help="rows in the episode's table (default 50)")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/db_episodes.json"))
    args = parser.parse_args()
    results = run(args.episodes, args.rounds, args.baseline_episodes, args.rows, args.pause_ms)
    print_table(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "benchmark": "db_episodes", "rows": args.rows, "machine": platform.machine(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **results,
    }, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
