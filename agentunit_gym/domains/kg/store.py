"""The bundled graph's on-disk store: built on first use (timed, logged), then only opened.

The bundled graph's triples are shipped in the package (:mod:`agentunit_gym.prebuilt`), so its
first use only loads them into pyoxigraph; a graph whose key has no shipped file is made first."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from agentunit_gym import prebuilt
from agentunit_gym.backends.sparql.embedded import Progress, build_store, store_path
from agentunit_gym.domains.kg.graph import GraphSource, bundled_source

log = logging.getLogger(__name__)

BUNDLED_TRIPLES_APPROX = 375_000
"""About how many triples the bundled graph has (the progress bar's total before counting)."""


def ensure_store(source: GraphSource, *, progress: Progress | None = None, total: int | None = None) -> Path:
    """The path of ``source``'s store, building it first when it is not cached.

    Raises:
        BackendError: the build failed.
    """
    path = store_path(source.key)
    if (path / "READY").is_file():
        return path
    log.warning("building the SPARQL store of the %s knowledge graph (first use; cached in %s) ...",
                source.label, path.parent)
    started = time.perf_counter()
    # The bundled graph's triples are shipped in the package: loaded, not made again.
    shipped = prebuilt.shipped(prebuilt.kg_triples_name(source.key))
    lines: Callable[[], Iterator[str]] = (
        source.ntriples if shipped is None else functools.partial(prebuilt.ntriples_lines, shipped))
    built = build_store(source.key, lines, progress=progress, total=total)
    log.warning("built the %s knowledge graph store in %.1f s", source.label, time.perf_counter() - started)
    return built


def bundled_store() -> Path:
    """The bundled graph's store path (built on first use)."""
    return ensure_store(bundled_source(), total=BUNDLED_TRIPLES_APPROX)


def main() -> int:
    """``python -m agentunit_gym.domains.kg.store``: build the bundled store with a progress bar."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    source = bundled_source()
    path = store_path(source.key)
    if (path / "READY").is_file():
        print(f"cached: {path}")
        return 0
    with Progress(TextColumn("building the KG store"), BarColumn(), TextColumn("{task.completed:,} triples"),
                  TimeElapsedColumn()) as bar:
        task = bar.add_task("build", total=BUNDLED_TRIPLES_APPROX)
        started = time.perf_counter()
        built = build_store(source.key, source.ntriples, total=BUNDLED_TRIPLES_APPROX,
                            progress=lambda done, total: bar.update(task, completed=done, total=total))
    print(f"built {built} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
