"""BM25 search over a catalog with bm25s: built once, saved beside the catalog key, memory-mapped.

WebShop searches with a Lucene BM25 index (pyserini) over each product's title,
description, first bullet point and options, and shows the top 50 hits
(``SEARCH_RETURN_N``). We index the same fields (:meth:`Product.search_text`) with bm25s (a
numpy/scipy BM25) in its Lucene variant, with Lucene's default parameters (``k1=1.2``,
``b=0.75``). What remains different: Lucene's analyzer stems words (Porter) and drops a
shorter stopword list; we do not stem, drop bm25s' English stopwords, and drop one-character
tokens. Ties are broken by catalog position, so results are deterministic.

The index of a catalog is built on first use (about 10 s for 100k generated products on
2 cores) and saved under ``<cache>/webshop/<catalog key>/index-<INDEX_VERSION>``; later
processes load it memory-mapped in milliseconds. The default catalog's index is shipped in
the package (:mod:`agentunit_gym.prebuilt`): its first use unpacks it (under a second).

The cache root is ``$AGENTUNIT_CACHE_DIR`` when set, else ``~/.cache/agentunit-gym``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agentunit_gym.backends.shop.catalog import Catalog
from agentunit_gym.errors import BackendError, MissingDependencyError

logger = logging.getLogger("agentunit_gym")

SEARCH_RETURN_N = 50
"""How many hits a search returns (WebShop's value)."""

CACHE_ENV = "AGENTUNIT_CACHE_DIR"

BM25_K1 = 1.2
BM25_B = 0.75
"""Lucene's ``BM25Similarity`` defaults, which WebShop's pyserini index uses."""

INDEX_VERSION = "2"
"""Bump with any change to what is indexed or how (fields, tokens, parameters): a saved index
of another version is never loaded. 2: WebShop's fields, Lucene's parameters."""

_TOKEN = re.compile(r"(?u)\b\w\w+\b")

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while an index is built."""


def cache_root() -> Path:
    """Where agentunit-gym keeps built data (``$AGENTUNIT_CACHE_DIR`` or ``~/.cache/agentunit-gym``)."""
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else Path.home() / ".cache" / "agentunit-gym"


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as exc:
        raise MissingDependencyError("bm25s", "webshop", "The WebShop search index") from exc
    return bm25s


_STOPWORDS: frozenset[str] | None = None


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens of two or more characters, English stopwords removed."""
    global _STOPWORDS
    if _STOPWORDS is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOPWORDS = frozenset(STOPWORDS_EN)
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class SearchIndex:
    """A BM25 index over one catalog's products (positions are catalog indexes)."""

    def __init__(self, retriever: Any, size: int) -> None:
        self._retriever = retriever
        self._vocab: dict[str, int] = retriever.vocab_dict
        self.size = size

    @property
    def bm25_parameters(self) -> tuple[float, float, str]:
        """``(k1, b, method)`` the index was built with (read back from the saved index)."""
        r = self._retriever
        return float(r.k1), float(r.b), str(r.method)

    @classmethod
    def directory(cls, catalog: Catalog, root: Path | None = None) -> Path:
        return (root or cache_root()) / "webshop" / catalog.key / f"index-{INDEX_VERSION}"

    @classmethod
    def open(cls, catalog: Catalog, *, root: Path | None = None, progress: Progress | None = None,
             mmap: bool = True) -> SearchIndex:
        """Load the catalog's saved index, building and saving it first when there is none.

        Raises:
            MissingDependencyError: bm25s is not installed.
            BackendError: a saved index does not match the catalog (delete the directory).
        """
        folder = cls.directory(catalog, root)
        if not (folder / "params.index.json").is_file():
            from agentunit_gym import prebuilt

            archive = prebuilt.shipped(prebuilt.webshop_index_name(catalog.key, INDEX_VERSION))
            if archive is not None:  # the default catalog's index, shipped in the package
                prebuilt.unpack_folder(archive, folder)
                return cls.load(folder, len(catalog), mmap=mmap)
            logger.warning("building the WebShop search index of %d products on first use (about 10 s per 100k; "
                           "cached in %s)", len(catalog), folder)
            cls.build(catalog, folder, progress=progress)
        return cls.load(folder, len(catalog), mmap=mmap)

    @classmethod
    def load(cls, folder: Path, size: int, *, mmap: bool = True) -> SearchIndex:
        bm25s = _bm25s()
        retriever = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False)
        documents = int(retriever.scores["num_docs"])
        if documents != size:
            raise BackendError(f"the search index in {folder} has {documents} documents, the catalog {size}; "
                               "delete that directory to rebuild it.")
        return cls(retriever, size)

    @classmethod
    def build(cls, catalog: Catalog, folder: Path, *, progress: Progress | None = None) -> None:
        """Tokenize every product, index, and save to ``folder`` (atomically: a half-built
        index is never seen by another process)."""
        bm25s = _bm25s()
        total = len(catalog)
        corpus: list[list[str]] = []
        step = max(1, total // 100)
        for index in range(total):
            corpus.append(tokenize(catalog.product(index).search_text()))
            if progress is not None and (index + 1) % step == 0:
                progress(index + 1, total)
        retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
        retriever.index(corpus, show_progress=False)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".index-", dir=folder.parent))
        staging.chmod(0o755)  # readable by the shop server's unprivileged user in its container
        try:
            retriever.save(str(staging))
            try:
                os.rename(staging, folder)
            except OSError:
                if not (folder / "params.index.json").is_file():
                    raise
                # Another process finished the same index first; theirs is identical.
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if progress is not None:
            progress(total, total)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Catalog positions of the best ``k`` products for ``query``, best first.

        Only products that match at least one query word are returned (as with Lucene).
        """
        ids = [self._vocab[t] for t in dict.fromkeys(tokenize(query)) if t in self._vocab]
        if not ids:
            return []
        scores = np.asarray(self._retriever.get_scores(ids))
        # Partition only the matching products: a partition over every product degenerates on
        # the tens of thousands of equal zero scores (35 ms instead of 0.3 ms on 100k).
        matched = np.flatnonzero(scores > 0)
        values = scores[matched]
        if matched.size > k:
            threshold = np.partition(values, values.size - k)[values.size - k]
            keep = values >= threshold  # ties at the k-th score stay in; position decides below
            matched, values = matched[keep], values[keep]
        order = np.lexsort((matched, -values))[:k]
        return [int(i) for i in matched[order]]
