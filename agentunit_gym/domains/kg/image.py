"""The generated build context of the ``kg`` image: the bundled graph and Oxigraph's server binary.

:mod:`agentunit_gym.backends.images` calls these two functions (named by the KG domain's ``DomainImage.generator``) to
make a copy of ``images/kg/`` with ``graph.nt.gz`` and ``oxigraph`` added, keyed by the
graph's content key and the binary, so a changed graph gives a new image tag.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from agentunit_gym.backends.sparql.container import oxigraph_binary
from agentunit_gym.domains.kg.graph import bundled_source


def context_key() -> str:
    """What the generated context depends on: the bundled graph's key and the binary's size and version."""
    binary = oxigraph_binary()
    return f"{bundled_source().key}|{binary.stat().st_size}"


def prepare_context(folder: Path) -> None:
    """Add ``graph.nt.gz`` and ``oxigraph`` to a copy of ``images/kg/``."""
    shutil.copy2(oxigraph_binary(), folder / "oxigraph")
    with gzip.open(folder / "graph.nt.gz", "wt", encoding="utf-8", compresslevel=6) as handle:
        for line in bundled_source().ntriples():
            handle.write(line)
