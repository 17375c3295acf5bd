"""The generated build context of the ``serve`` image: agentunit-gym and every package it needs, as wheels.

:mod:`agentunit_gym.backends.images` calls :func:`context_key` and :func:`prepare_context` to make
a copy of ``images/serve/`` with a ``wheels/`` folder (``self/`` and ``deps/``, two layers): a wheel
of the agentunit-gym that runs
here (packed from its package folder and installed metadata, so an editable checkout works
too) and, from the package index, the wheels of everything ``agentunit-gym[serve,db]`` needs,
each at the version installed here (the versions this environment runs and was tested with).
The build then installs them with ``pip --no-index``: nothing is fetched inside the build but
Debian's packages, so it works where containers cannot reach the package index.

The image is Debian bookworm's, whose Python is 3.11: the dependency closure is the one pip
sees there (markers evaluated for CPython 3.11 on Linux, this machine's architecture).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import platform
import shutil
import sys
import zipfile
from pathlib import Path

from agentunit_gym.backends import process
from agentunit_gym.errors import ImageBuildError, MissingDependencyError

DISTRIBUTION = "agentunit-gym"
EXTRAS = ("serve", "db")
"""The extras the image installs: the server, and the DB domain's statement parser."""

IMAGE_PYTHON = ("3.11", "3.11.2")
"""Debian bookworm's Python (``python_version``, ``python_full_version``), what the image runs."""

_DOWNLOAD_TIMEOUT_S = 1200.0
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def image_environment(machine: str | None = None) -> dict[str, str]:
    """The marker environment of the image's Python (PEP 508 names)."""
    return {"python_version": IMAGE_PYTHON[0], "python_full_version": IMAGE_PYTHON[1], "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": machine or platform.machine(),
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "platform_release": "", "platform_version": "", "implementation_version": IMAGE_PYTHON[1]}


def dependency_pins(machine: str | None = None) -> dict[str, str]:
    """Every distribution ``agentunit-gym[serve,db]`` needs in the image, name -> the version installed here.

    Raises:
        MissingDependencyError: a needed distribution is not installed here (install the serve
            extra first: the image takes this environment's versions).
    """
    try:
        from packaging.requirements import Requirement
    except ImportError as exc:  # packaging comes with the serve extra's tree
        raise MissingDependencyError("packaging", "serve", "building the serve image") from exc
    environment = image_environment(machine)
    wanted: dict[str, set[str]] = {}
    pins: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(DISTRIBUTION, frozenset(EXTRAS))]
    while todo:
        name, extras = todo.pop()
        key = _canonical(name)
        known = wanted.get(key)
        if known is not None and extras <= known:
            continue
        wanted[key] = (known or set()) | set(extras)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise MissingDependencyError(name, "serve", "building the serve image (it takes the versions "
                                         "installed here)") from exc
        pins[key] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({**environment, "extra": extra})
                                     for extra in ("", *sorted(wanted[key]))):
                todo.append((requirement.name, frozenset(requirement.extras)))
    pins.pop(DISTRIBUTION, None)
    return dict(sorted(pins.items()))


def _package_files() -> list[Path]:
    return sorted(p for p in _PACKAGE_ROOT.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))


def _source_key() -> str:
    digest = hashlib.sha256()
    for path in _package_files():
        digest.update(path.relative_to(_PACKAGE_ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def context_key() -> str:
    """What the generated context depends on: agentunit-gym's files and the pinned versions."""
    pins = ",".join(f"{name}=={version}" for name, version in dependency_pins().items())
    return f"{_source_key()}|{hashlib.sha256(pins.encode()).hexdigest()}"


def build_own_wheel(target: Path) -> Path:
    """Pack the running agentunit-gym (its package folder, with the installed distribution's
    metadata and entry points) as a wheel in ``target``; no build tool, no network.

    Returns:
        The wheel's path.
    """
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    version = distribution.version
    dist_info = f"agentunit_gym-{version}.dist-info"
    metadata = (distribution.read_text("METADATA")
                or f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {version}\n")
    files: dict[str, bytes] = {}
    for path in _package_files():
        files[f"agentunit_gym/{path.relative_to(_PACKAGE_ROOT).as_posix()}"] = path.read_bytes()
    files[f"{dist_info}/METADATA"] = metadata.encode()
    files[f"{dist_info}/entry_points.txt"] = (distribution.read_text("entry_points.txt") or "").encode()
    files[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: agentunit-gym\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n")
    record = [f"{name},sha256={_urlsafe_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = target / f"agentunit_gym-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return wheel


def _urlsafe_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheelhouse() -> Path:
    cache = Path(os.environ.get("AGENTUNIT_CACHE_DIR") or Path.home() / ".cache" / "agentunit-gym")
    return cache / "images" / "serve-wheelhouse"


GLIBC_MINOR = 36
"""Debian bookworm's glibc is 2.36: the image takes manylinux wheels up to ``manylinux_2_36``."""


def platform_tags(arch: str) -> list[str]:
    """The platform tags of wheels the image can install, newest first (pip before 24 does not
    widen ``--platform manylinux_2_36`` to the older manylinux tags by itself)."""
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for minor in range(GLIBC_MINOR, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in legacy:
            tags.append(f"{legacy[minor]}_{arch}")
    return [*tags, f"linux_{arch}"]


def download_wheels(pins: dict[str, str], target: Path, machine: str | None = None) -> None:
    """Put a wheel of each pinned distribution for the image's Python in ``target``, from the
    package index (pip, as configured here), through a shared wheelhouse so a new context
    downloads only what changed.

    Raises:
        ImageBuildError: pip could not get one of them (an sdist-only release, no network).
    """
    house = _wheelhouse()
    house.mkdir(parents=True, exist_ok=True)
    arch = machine or platform.machine()
    missing = [f"{name}=={version}" for name, version in pins.items() if _find_wheel(house, name, version) is None]
    if missing:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(house),
                "--python-version", IMAGE_PYTHON[0], "--implementation", "cp",
                "--abi", "cp311", "--abi", "abi3", "--abi", "none",
                *(arg for tag in platform_tags(arch) for arg in ("--platform", tag)), *missing]
        done = process.run(argv, timeout=_DOWNLOAD_TIMEOUT_S)
        if done.returncode != 0:
            log = (done.stdout + done.stderr).decode("utf-8", "replace").splitlines()[-20:]
            raise ImageBuildError("cannot download the wheels of the serve image (pip download, for CPython "
                                  f"{IMAGE_PYTHON[0]} on linux {arch}):\n" + "\n".join(log))
    for name, version in pins.items():
        wheel = _find_wheel(house, name, version)
        if wheel is None:
            raise ImageBuildError(f"pip download gave no wheel of {name}=={version} for the serve image.")
        _link_or_copy(wheel, target / wheel.name)


def _find_wheel(house: Path, name: str, version: str) -> Path | None:
    prefix = f"{_canonical(name).replace('-', '_')}-{version}-"
    for wheel in house.glob("*.whl"):
        if wheel.name.lower().replace(".", "_").startswith(prefix.lower().replace(".", "_")):
            return wheel
    return None


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def prepare_context(folder: Path) -> None:
    """Add ``wheels/`` to a copy of ``images/serve/``: ``wheels/deps/`` the dependencies' wheels
    and their pins (``requirements.txt``), ``wheels/self/`` agentunit-gym's own wheel. Two
    folders, two layers: a new commit changes only the second, so Docker's layer cache keeps
    the dependencies' install (most of the build) while their versions stay."""
    deps, own = folder / "wheels" / "deps", folder / "wheels" / "self"
    deps.mkdir(parents=True)
    own.mkdir()
    pins = dependency_pins()
    download_wheels(pins, deps)
    (deps / "requirements.txt").write_text("".join(f"{name}=={version}\n" for name, version in pins.items()),
                                           encoding="utf-8")
    build_own_wheel(own)
