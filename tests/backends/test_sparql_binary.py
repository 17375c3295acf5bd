"""Finding the Oxigraph server binary the kg image copies in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentunit_gym.backends.sparql import container


def test_a_shim_on_path_is_not_taken_for_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = tmp_path / "oxigraph"
    shim.write_text("#!/usr/bin/env bash\nexec pyenv exec oxigraph \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "no-base"))
    monkeypatch.setattr(container.importlib.metadata, "distribution",
                        lambda name: (_ for _ in ()).throw(container.importlib.metadata.PackageNotFoundError(name)))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(container.MissingDependencyError, match=r"pip install \"agentunit-gym\[kg-server\]\""):
        container.oxigraph_binary()


def test_the_installed_server_is_an_executable() -> None:
    try:
        container.importlib.metadata.distribution("oxigraph")
    except container.importlib.metadata.PackageNotFoundError:
        pytest.skip("the kg-server extra (PyPI's oxigraph) is not installed")
    path = container.oxigraph_binary()
    assert path.name == "oxigraph"
    with path.open("rb") as f:
        assert f.read(4) == b"\x7fELF"
