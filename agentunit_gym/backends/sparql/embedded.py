"""``embedded``: a pyoxigraph store in process, opened read-only from an on-disk store.

The store is built once per graph (:func:`build_store`) under
``~/.cache/agentunit-gym/kg/<graph key>/`` (``AGENTUNIT_CACHE_DIR`` moves the root) and
then only opened, read-only: an update cannot run (pyoxigraph refuses transactions on a
read-only instance). A build writes a temporary folder and renames it into place, so two
processes building at once never see half a store.

Time limit: pyoxigraph evaluates lazily, and the deadline is checked between result rows,
so a long stream of rows stops at the limit. A single aggregate step (``COUNT``, ``MAX``)
is not interruptible in process; the env's queries are generated from a fixed grammar and
their worst case on the bundled graph is measured in docs/performance.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from agentunit_gym.backends.sparql.base import SelectResult, SPARQLBackend, check_query_limits, local_name
from agentunit_gym.errors import BackendError, BackendTimeoutError, BackendUnavailableError, MissingDependencyError

log = logging.getLogger(__name__)

Progress = Callable[[int, int | None], None]
"""``progress(done, total)``: triples loaded so far, and the total when known."""

_BATCH = 50_000


def _pyoxigraph() -> Any:
    try:
        import pyoxigraph
    except ImportError as exc:
        raise MissingDependencyError("pyoxigraph", "kg", "the embedded SPARQL store") from exc
    return pyoxigraph


def cache_root() -> Path:
    """``$AGENTUNIT_CACHE_DIR`` or ``~/.cache/agentunit-gym``."""
    base = os.environ.get("AGENTUNIT_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "agentunit-gym"


def store_path(key: str, *, root: Path | None = None) -> Path:
    """Where the store of the graph with content key ``key`` lives (under ``root``, default :func:`cache_root`)."""
    return (root if root is not None else cache_root()) / "kg" / key / "store"


def build_store(
    key: str,
    lines: Callable[[], Any],
    *,
    progress: Progress | None = None,
    total: int | None = None,
    root: Path | None = None,
) -> Path:
    """Build the on-disk store of a graph unless it is cached; return its path.

    Args:
        key: the graph's content key.
        lines: returns an iterator of N-Triples lines.
        progress: called after each batch of triples with ``(done, total)``.
        total: the number of lines, when known (for the progress bar).
        root: the cache root (default :func:`cache_root`).

    Raises:
        BackendError: the triples do not parse, or the store cannot be written.
    """
    target = store_path(key, root=root)
    if (target / "READY").is_file():
        return target
    ox = _pyoxigraph()
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="building-", dir=target.parent))
    started = time.perf_counter()
    try:
        store = ox.Store(str(work / "store"))
        batch: list[str] = []
        done = 0
        for line in lines():
            batch.append(line)
            if len(batch) >= _BATCH:
                store.bulk_load("".join(batch).encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)
                done += len(batch)
                batch.clear()
                if progress is not None:
                    progress(done, total)
        if batch:
            store.bulk_load("".join(batch).encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)
            done += len(batch)
        store.flush()
        del store
        if progress is not None:
            progress(done, done)
        (work / "store" / "READY").write_text(f"{done}\n", encoding="utf-8")
        try:
            (work / "store").rename(target)
        except OSError:
            if not (target / "READY").is_file():  # nobody else won the race: a real failure
                raise
    except (OSError, SyntaxError, ValueError) as exc:
        raise BackendError(f"cannot build the SPARQL store for graph {key} in {target.parent}: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("built the SPARQL store of graph %s (%d triples) in %.1f s", key, done, time.perf_counter() - started)
    return target


class EmbeddedSPARQL(SPARQLBackend):
    """A read-only pyoxigraph store.

    Args:
        path: a store folder made by :func:`build_store`.

    Raises:
        BackendUnavailableError: the folder holds no finished store, or it cannot be opened.
    """

    kind: ClassVar[str] = "embedded"

    def __init__(self, path: str | Path) -> None:
        ox = _pyoxigraph()
        self.path = Path(path)
        if not (self.path / "READY").is_file():
            raise BackendUnavailableError(f"{self.path} holds no finished SPARQL store; build it with build_store().")
        try:
            self._store: Any = ox.Store.read_only(str(self.path))
        except OSError as exc:
            raise BackendUnavailableError(f"cannot open the SPARQL store at {self.path}: {exc}") from exc

    def select(self, query: str, *, timeout: float, limit: int) -> SelectResult:
        check_query_limits(timeout, limit)
        store = self._open_store()
        started = time.perf_counter()
        deadline = started + timeout
        try:
            solutions = store.query(query)
            names = tuple(v.value for v in solutions.variables)
            rows: list[tuple[str | None, ...]] = []
            truncated = False
            for solution in solutions:
                if time.perf_counter() > deadline:
                    raise BackendTimeoutError(f"the SPARQL query did not finish within {timeout:g} s.")
                if len(rows) >= limit:
                    truncated = True
                    break
                rows.append(tuple(None if term is None else local_name(term.value) for term in solution))
        except BackendTimeoutError:
            raise
        except (SyntaxError, OSError, ValueError, TypeError) as exc:
            raise BackendError(f"the embedded store refused the query: {exc}") from exc
        elapsed = time.perf_counter() - started
        if elapsed > timeout:
            raise BackendTimeoutError(f"the SPARQL query did not finish within {timeout:g} s ({elapsed:.2f} s).")
        return SelectResult(names, tuple(rows), truncated, elapsed)

    def triple_count(self) -> int:
        return int(len(self._open_store()))

    def update(self, statement: str) -> None:
        """Try an update: always refused, the store is read-only (used by the safety tests).

        Raises:
            BackendError: always.
        """
        try:
            self._open_store().update(statement)
        except (RuntimeError, OSError, SyntaxError) as exc:
            raise BackendError(f"the embedded store is read-only: {exc}") from exc
        raise BackendError("the embedded store accepted an update; it must be opened read-only.")

    def close(self) -> None:
        self._store = None

    def _open_store(self) -> Any:
        if self._store is None:
            raise BackendUnavailableError("the embedded SPARQL store is closed.")
        return self._store
