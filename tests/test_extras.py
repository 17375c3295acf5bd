"""The extras install together: each alone, all at once (``[all]``), and one after another in
either order, as pip installs them.

pip resolves only what it is asked for: ``pip install "agentunit-gym[serve]"`` after
``[integrations]`` took the newest fastmcp (which needs mcp 2.3) and broke verifiers' pin of
mcp 2.0.0, though both extras resolve together. So beside resolving each extra and ``[all]``,
for every two extras whose own resolutions pin a package they share at different versions,
the second is resolved preferring what the first installed (as pip keeps an installed version
that still fits) and the resulting set must satisfy both extras (what ``pip check`` checks).

Resolved with ``uv pip compile`` against the package index (uv comes with the ``test`` extra).
Without an index these tests skip, saying why; with ``CI=true`` (CI reaches PyPI) they fail.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
PROJECT = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
IN_CI = os.environ.get("CI", "").lower() == "true"
PYTHON_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
RESOLVE_DEADLINE_S = 300
# Extras for this repository's own work, not for users: resolved alone, not paired.
INTERNAL = {"test", "dev"}

pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: CI reaches PyPI, so this is a failure, not a skip)")
    pytest.skip(reason)


@functools.lru_cache(maxsize=1)
def _uv() -> str | None:
    try:
        from uv import find_uv_bin  # the `uv` wheel of the test extra
    except ImportError:
        return shutil.which("uv")
    return str(find_uv_bin())


def _compile(*extras: str, preferences: Path | None = None, constraints: Path | None = None,
             ) -> subprocess.CompletedProcess[str]:
    """``uv pip compile pyproject.toml --extra ...`` for this Python: exact pins on stdout (or in
    ``preferences``, whose pins it prefers, as pip prefers what is installed)."""
    uv = _uv()
    assert uv is not None
    command = [uv, "pip", "compile", str(PYPROJECT), "--python-version", PYTHON_VERSION, "--no-header",
               "--no-annotate", "--quiet", *(a for e in extras for a in ("--extra", e))]
    if preferences is not None:
        command += ["--output-file", str(preferences)]
    if constraints is not None:
        command += ["--constraint", str(constraints)]
    return subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_DEADLINE_S, check=False,
                          cwd=ROOT)


def _pins(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


@functools.cache
def _resolved(*extras: str) -> dict[str, str]:
    """The pins of ``extras`` resolved together; a conflict fails the test with uv's explanation."""
    done = _compile(*extras)
    assert done.returncode == 0, f"[{','.join(extras)}] does not resolve:\n{done.stderr[-3000:]}"
    return _pins(done.stdout)


@pytest.fixture(scope="module", autouse=True)
def _index() -> None:
    """uv and a reachable package index, or a skip (a failure in CI) saying which is missing."""
    if _uv() is None:
        _unavailable('uv is not installed (it comes with the test extra: pip install -e ".[test]")')
    probe = subprocess.run([_uv() or "uv", "pip", "compile", "-", "--no-header", "--quiet"], input="pyyaml>=6,<7\n",
                           capture_output=True, text=True, timeout=RESOLVE_DEADLINE_S, check=False)
    if probe.returncode != 0:
        _unavailable(f"no package index answers uv: {probe.stderr.strip()[-500:]}")


def test_all_holds_every_user_extra() -> None:
    """``[all]`` resolving means every user extra resolves with every other; it must hold them all."""
    everything = {canonicalize_name(Requirement(t).name): str(Requirement(t).specifier)
                  for t in [*PROJECT["dependencies"], *EXTRAS["all"]]}
    for extra, texts in EXTRAS.items():
        if extra in INTERNAL or extra == "all":
            continue
        for text in texts:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            if name == "agentunit-gym":
                continue
            assert everything.get(name) == str(requirement.specifier), (
                f"[all] must hold {text} of [{extra}] (it has {everything.get(name)!r})")


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_resolves(extra: str) -> None:
    assert _resolved(extra)


def _overlapping_pairs() -> list[tuple[str, str]]:
    return list(itertools.combinations(sorted(e for e in EXTRAS if e not in INTERNAL | {"all"}), 2))


@pytest.mark.parametrize(("first", "second"), _overlapping_pairs(), ids=lambda e: e)
def test_two_extras_installed_one_after_the_other_agree(first: str, second: str, tmp_path: Path) -> None:
    """pip installs the second extra keeping what it can of the first, and never re-checks the
    first's packages: the result must still satisfy both (else `pip check` fails)."""
    alone = {extra: _resolved(extra) for extra in (first, second)}
    shared = set(alone[first]) & set(alone[second])
    if all(alone[first][name] == alone[second][name] for name in shared):
        return  # nothing they share differs: either order installs the same versions
    for before, after in ((first, second), (second, first)):
        installed = _resolved(before)
        preferences = tmp_path / f"{before}-then-{after}.txt"
        preferences.write_text("".join(f"{n}=={v}\n" for n, v in installed.items()))
        done = _compile(after, preferences=preferences)
        assert done.returncode == 0, f"[{after}] alone does not resolve:\n{done.stderr[-3000:]}"
        state = {**installed, **_pins(preferences.read_text())}
        final = tmp_path / f"{before}-then-{after}.state.txt"
        final.write_text("".join(f"{n}=={v}\n" for n, v in state.items()))
        check = _compile(before, after, constraints=final)
        changed = {n: f"{installed[n]} -> {state[n]}" for n in installed if installed[n] != state[n]}
        assert check.returncode == 0, (
            f'pip install "agentunit-gym[{after}]" after [{before}] leaves a broken set (changed: {changed}):\n'
            f"{check.stderr[-3000:]}")


def test_openenv_current_package_still_excludes_mcp_2() -> None:
    """Why the serve extra stays on openenv-core (docs/serving.md, "OpenEnv's two packages"):
    ``openenv`` requires fastmcp<4, whose releases all require mcp<2, while the mcp and
    integrations extras need mcp 2.0. When an ``openenv`` release resolves with mcp 2.0 this
    fails: move the serve extra to ``openenv`` then (and the docs' section goes)."""
    uv = _uv()
    assert uv is not None
    done = subprocess.run([uv, "pip", "compile", "-", "--python-version", PYTHON_VERSION, "--no-header", "--quiet"],
                          input="openenv>=0.10\nmcp>=2.0,<2.1\n", capture_output=True, text=True,
                          timeout=RESOLVE_DEADLINE_S, check=False)
    assert done.returncode != 0, (
        "openenv now resolves with mcp 2.0: move the serve extra from openenv-core to openenv "
        f"(docs/serving.md, \"OpenEnv's two packages\"):\n{done.stdout}")
    assert "fastmcp" in done.stderr and "mcp>=1.24.0,<2.0" in done.stderr, done.stderr[-3000:]
