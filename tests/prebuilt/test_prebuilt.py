"""The data shipped in the package (agentunit_gym.prebuilt) is today's, and first uses take it.

A stale file is not wrong at run time (its key no longer matches, so the data is built on
first use as before) but it makes a new user's first run slow again: these tests fail until
`python tools/refresh_prebuilt.py` refreshes it.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import tarfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agentunit_gym import prebuilt
from agentunit_gym.backends.shop.catalog import GeneratedCatalog
from agentunit_gym.backends.shop.search import INDEX_VERSION, SearchIndex
from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.domains.kg import graph
from agentunit_gym.domains.kg.store import ensure_store
from agentunit_gym.errors import BackendError

REFRESH = "refresh with `python tools/refresh_prebuilt.py`"


def _expected_names() -> set[str]:
    return {prebuilt.webshop_index_name(GeneratedCatalog().key, INDEX_VERSION),
            prebuilt.kg_triples_name(graph.bundled_source().key)}


def test_the_package_ships_todays_files_and_no_stale_one() -> None:
    shipped = {p.name for p in prebuilt.HERE.glob("*.xz")}
    assert shipped == _expected_names(), REFRESH


def test_the_shipped_triples_are_the_bundled_graph() -> None:
    path = prebuilt.shipped(prebuilt.kg_triples_name(graph.bundled_source().key))
    assert path is not None, REFRESH
    digest = hashlib.sha256()
    count = 0
    for line in prebuilt.ntriples_lines(path):
        digest.update(line.encode("utf-8"))
        count += 1
    assert count == 375_031
    assert digest.hexdigest() == graph.BUNDLED_GRAPH_SHA256, REFRESH


def test_the_first_kg_store_loads_the_shipped_triples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTUNIT_CACHE_DIR", str(tmp_path))

    def not_made_again() -> Iterator[str]:
        raise AssertionError("the bundled graph was made again, not read from the shipped file")

    source = graph.bundled_source()
    store = EmbeddedSPARQL(ensure_store(graph.GraphSource(source.key, source.label, not_made_again)))
    assert store.triple_count() == 375_031
    assert (tmp_path / "kg" / source.key / "store" / "READY").is_file()


def test_a_graph_with_no_shipped_file_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTUNIT_CACHE_DIR", str(tmp_path))
    source = graph.GraphSource.from_text('<http://e/a> <http://e/b> "c" .\n')
    store = EmbeddedSPARQL(ensure_store(source))
    assert store.select("SELECT ?o WHERE { ?s ?p ?o }", timeout=10.0, limit=5).column() == ["c"]


def test_the_first_webshop_index_is_unpacked_not_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the default catalog's index was built, not unpacked")

    monkeypatch.setattr(SearchIndex, "build", no_build)
    catalog = GeneratedCatalog()
    index = SearchIndex.open(catalog, root=tmp_path)
    assert index.size == 100_000
    assert index.bm25_parameters == (1.2, 0.75, "lucene")
    product = catalog.product(4321)
    assert 4321 in index.search(product.title)
    assert SearchIndex.directory(catalog, tmp_path).stat().st_mode & 0o755 == 0o755


def _columns(folder: Path) -> tuple[dict[str, object], dict[str, tuple[list[int], list[float]]]]:
    """A saved bm25s index as its parameters and, per term, its (documents, scores) column."""
    params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
    data, indices, indptr = (np.load(folder / f"{name}.csc.index.npy") for name in ("data", "indices", "indptr"))
    # bm25s adds the empty token last, with no column.
    columns = {term: (indices[indptr[i]:indptr[i + 1]].tolist(), data[indptr[i]:indptr[i + 1]].tolist())
               for term, i in vocab.items() if i + 1 < len(indptr)}
    return params, columns


@pytest.mark.catalog
def test_the_shipped_webshop_index_equals_a_fresh_build(tmp_path: Path) -> None:
    # bm25s numbers the terms in set order (it changes with PYTHONHASHSEED), so two builds
    # differ in bytes: compared term by term, each term's documents and scores must be equal.
    catalog = GeneratedCatalog()
    archive = prebuilt.shipped(prebuilt.webshop_index_name(catalog.key, INDEX_VERSION))
    assert archive is not None, REFRESH
    prebuilt.unpack_folder(archive, tmp_path / "shipped")
    SearchIndex.build(catalog, tmp_path / "built")
    names = sorted(p.name for p in (tmp_path / "built").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "shipped").iterdir())
    built_params, built = _columns(tmp_path / "built")
    shipped_params, shipped = _columns(tmp_path / "shipped")
    assert shipped_params == built_params, REFRESH
    assert shipped.keys() == built.keys(), REFRESH
    different = [term for term in built if built[term] != shipped[term]]
    assert different == [], f"{len(different)} terms index differently, e.g. {different[:5]}: {REFRESH}"


def _tar_xz(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    path.write_bytes(lzma.compress(buffer.getvalue()))
    return path


def test_unpack_writes_the_files_and_keeps_a_copy_already_there(tmp_path: Path) -> None:
    archive = _tar_xz(tmp_path / "a.tar.xz", [(tarfile.TarInfo("x.json"), b"{}"), (tarfile.TarInfo("y.npy"), b"12")])
    prebuilt.unpack_folder(archive, tmp_path / "out" / "index")
    assert (tmp_path / "out" / "index" / "x.json").read_bytes() == b"{}"
    assert (tmp_path / "out" / "index" / "y.npy").read_bytes() == b"12"
    (tmp_path / "out" / "index" / "x.json").write_bytes(b"theirs")
    prebuilt.unpack_folder(archive, tmp_path / "out" / "index")  # another process won: its copy stays
    assert (tmp_path / "out" / "index" / "x.json").read_bytes() == b"theirs"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["index"]  # no staging folder left


@pytest.mark.parametrize("member", ["../escape", "sub/file", ".hidden"])
def test_unpack_refuses_anything_but_top_level_plain_files(tmp_path: Path, member: str) -> None:
    archive = _tar_xz(tmp_path / "bad.tar.xz", [(tarfile.TarInfo(member), b"x")])
    with pytest.raises(BackendError, match="not a plain file at its top level"):
        prebuilt.unpack_folder(archive, tmp_path / "out" / "index")
    assert not (tmp_path / "escape").exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_unpack_refuses_a_link(tmp_path: Path) -> None:
    link = tarfile.TarInfo("x.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = _tar_xz(tmp_path / "link.tar.xz", [(link, b"")])
    with pytest.raises(BackendError, match="not a plain file"):
        prebuilt.unpack_folder(archive, tmp_path / "out" / "index")
