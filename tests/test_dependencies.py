"""pyproject.toml's ranges are bounded, and requirements/test.lock.txt is a lock of them.

A fresh machine installs whatever the ranges allow on that day; an unbounded range is how the
newest Ray broke CI (issue 19). The lock is what CI installs: it must pin the whole `test`
extra, inside the ranges, so a refresh that forgets a package or leaves a range fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
LOCK = ROOT / "requirements" / "test.lock.txt"


def _requirements() -> list[tuple[str, Requirement]]:
    found = [("dependencies", Requirement(text)) for text in PROJECT["dependencies"]]
    for extra, texts in PROJECT["optional-dependencies"].items():
        found += [(extra, Requirement(text)) for text in texts]
    return [(where, req) for where, req in found if canonicalize_name(req.name) != "agentunit-gym"]


def _locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"the lock must pin exact versions: {line}"
        pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


@pytest.mark.parametrize(("where", "requirement"), _requirements(), ids=lambda v: str(v))
def test_every_range_has_a_lower_and_an_upper_bound(where: str, requirement: Requirement) -> None:
    operators = {spec.operator for spec in requirement.specifier}
    assert operators & {"==", ">=", ">", "~="}, f"{requirement} in {where}: no lower bound"
    assert operators & {"==", "<", "<=", "~="}, f"{requirement} in {where}: no upper bound"


def test_the_lock_pins_every_test_requirement_inside_its_range() -> None:
    locked = _locked()
    test_extra = [Requirement(text) for text in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]]
    for requirement in test_extra:
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement.name} is not in {LOCK.name}: run `bash scripts/lock.sh`"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"{LOCK.name} pins {requirement.name}=={locked[name]}, outside {requirement}: run `bash scripts/lock.sh`")


def test_the_ray_extra_brings_ray_client() -> None:
    """`eval --ray ray://HOST:PORT` is Ray Client, and `ray start --ray-client-server-port` needs it."""
    (ray,) = [Requirement(text) for text in PROJECT["optional-dependencies"]["ray"]]
    assert "client" in ray.extras
    assert "grpcio" in _locked(), "ray[client]'s grpcio is missing from the lock"
