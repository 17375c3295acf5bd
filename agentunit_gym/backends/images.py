"""Docker images of agentunit-gym: build on first use, content-hash tags, an air-gapped base.

Every image is a directory ``agentunit_gym/images/<name>/`` shipped in the package, whose
Dockerfile starts with ``ARG BASE_IMAGE`` + ``FROM ${BASE_IMAGE}``. Its tag carries a hash
of the build context and of the base image id (``agentunit-gym/<name>:<hash12>``), so a
changed Dockerfile or a new base gives a new tag and :func:`ensure_image` rebuilds it.
Images are labelled ``agentunit_gym=1`` and ``agentunit_gym.content_hash=<hash>``.

The base is, in order: ``$AGENTUNIT_BASE_IMAGE``; ``debian:bookworm-slim`` when present or
pullable within a deadline; ``agentunit-gym/base:bookworm``, which :func:`bootstrap_base`
makes from Debian packages (debootstrap + ``docker import``) on machines that cannot pull.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.backends import process
from agentunit_gym.errors import BackendUnavailableError, ConfigError, ImageBuildError

logger = logging.getLogger("agentunit_gym")

LABEL = "agentunit_gym"
"""Label (value ``"1"``) on every image and container agentunit-gym creates."""
HASH_LABEL = "agentunit_gym.content_hash"
NAME_LABEL = "agentunit_gym.image"
BASE_LABEL = "agentunit_gym.base"

DEFAULT_BASE = "debian:bookworm-slim"
BOOTSTRAP_BASE = "agentunit-gym/base:bookworm"
BASE_ENV = "AGENTUNIT_BASE_IMAGE"
DEBIAN_MIRROR = "http://deb.debian.org/debian"

Progress = Callable[[str], None]

IMAGES_ROOT = Path(__file__).resolve().parent.parent / "images"
"""Where the shipped image directories live (package data)."""

# Build and pull can be slow (apt inside the build); each has its own overall deadline, and
# the client's per-read timeout is set high enough for a quiet apt step.
_BUILD_TIMEOUT_S = 1800.0
_PULL_TIMEOUT_S = 30.0
_BOOTSTRAP_TIMEOUT_S = 1800.0
_LOG_TAIL = 25

_lock = threading.Lock()
_ensured: dict[tuple[str, str, str], str] = {}
_pull_failed: set[str] = set()


@dataclass(frozen=True)
class ImageInfo:
    """One image of ours found on the daemon."""

    name: str
    tags: tuple[str, ...]
    id: str
    content_hash: str
    base: str
    size_bytes: int
    current: bool
    """Whether the tag matches the shipped build context (False: stale, would be rebuilt)."""


@dataclass(frozen=True)
class CleanupReport:
    """What :func:`cleanup` removed."""

    containers: tuple[str, ...]
    images: tuple[str, ...]


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _client(client: Any | None, timeout: float = 600.0) -> Any:
    return client if client is not None else process.docker_client(timeout=timeout)


@dataclass(frozen=True)
class ImageSource:
    """Where an image declared by a domain (``Domain.image``) is built from."""

    context: Path
    """The shipped build context (a folder with a Dockerfile)."""
    generator: str | None = None
    """A module whose ``context_key() -> str`` (a content key of what it adds, cheap to
    compute) and ``prepare_context(folder)`` (adds the files to a copy of the shipped folder)
    complete the context; None when the folder is the whole context."""


_sources: dict[str, ImageSource] = {
    # The env server's image (docs/serving.md, "The server image"): the shipped folder plus the
    # wheels of agentunit-gym and its dependencies, which its generator adds.
    "serve": ImageSource(IMAGES_ROOT / "serve", generator="agentunit_gym.backends.serve_image"),
}


def add_image_source(name: str, source: ImageSource) -> None:
    """Make image ``name`` buildable from ``source``. The domain registry calls it for every
    domain's declared image when it loads (``import agentunit_gym`` loads it), so this layer
    names no domain; an image not added here is the shipped folder ``agentunit_gym/images/<name>``.

    Raises:
        ConfigError: another source already has that name.
    """
    known = _sources.get(name)
    if known is not None and known != source:
        raise ConfigError(f"two domains declare the image {name!r} ({known.context} and {source.context}); "
                          "give one of them another name.")
    _sources[name] = source


def image_dir(name: str, *, root: Path | None = None) -> Path:
    """The build context of image ``name`` (for a generated context, its cached copy).

    Raises:
        ConfigError: no such image directory, or it has no Dockerfile.
        ImageBuildError: a generated context could not be prepared.
    """
    source = _sources.get(name) if root is None else None
    path = source.context if source is not None else (root if root is not None else IMAGES_ROOT) / name
    if not (path / "Dockerfile").is_file():
        known = ", ".join(available_images(root=root)) or "none"
        raise ConfigError(f"unknown image {name!r}: no {path / 'Dockerfile'}. Known images: {known}.")
    if source is not None and source.generator is not None:
        return _generated_context(name, path, source.generator)
    return path


def _generated_target(name: str, shipped: Path, module: Any) -> Path:
    """Where the generated context of image ``name`` is cached (ready once it holds ``.agentunit-ready``)."""
    key = hashlib.sha256(f"{context_hash(shipped)}|{module.context_key()}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("AGENTUNIT_CACHE_DIR") or Path.home() / ".cache" / "agentunit-gym")
    return cache / "images" / f"{name}-{key}"


def _unprepared(name: str) -> bool:
    """Whether image ``name`` has a generated context not prepared yet (listing it would prepare
    it: for the serve image, a download of its wheels)."""
    import importlib

    source = _sources.get(name)
    if source is None or source.generator is None:
        return False
    target = _generated_target(name, source.context, importlib.import_module(source.generator))
    return not (target / ".agentunit-ready").is_file()


def _generated_context(name: str, shipped: Path, module_name: str) -> Path:
    import importlib

    module = importlib.import_module(module_name)
    target = _generated_target(name, shipped, module)
    key = target.name.rpartition("-")[2]
    if (target / ".agentunit-ready").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=target.parent))
    try:
        shutil.copytree(shipped, work / "ctx")
        module.prepare_context(work / "ctx")
        (work / "ctx" / ".agentunit-ready").write_text(key, encoding="utf-8")
        try:
            (work / "ctx").rename(target)
        except OSError:
            if not (target / ".agentunit-ready").is_file():
                raise
    except OSError as exc:
        raise ImageBuildError(f"cannot prepare the build context of image {name!r} in {target}: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def available_images(*, root: Path | None = None) -> list[str]:
    """Names of the image directories (those holding a Dockerfile) under ``root``; without
    ``root``, the shipped ones and every image a domain declares."""
    base = root if root is not None else IMAGES_ROOT
    names = {p.name for p in base.iterdir() if (p / "Dockerfile").is_file()} if base.is_dir() else set()
    if root is None:
        names |= {name for name, source in _sources.items() if (source.context / "Dockerfile").is_file()}
    return sorted(names)


def context_hash(path: Path, extra: Iterable[str] = ()) -> str:
    """SHA-256 over the build context: every file's relative path, mode bit x and bytes.

    ``extra`` strings (the base image id) are mixed in, so a new base changes the hash.
    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = file.relative_to(path).as_posix()
        executable = os.access(file, os.X_OK)
        digest.update(f"{rel}\0{int(executable)}\0{file.stat().st_size}\0".encode())
        digest.update(file.read_bytes())
    for item in extra:
        digest.update(b"\0extra\0" + item.encode())
    return digest.hexdigest()


def _image_id(client: Any, ref: str) -> str | None:
    docker_errors = process.docker_sdk().errors

    try:
        return str(client.images.get(ref).id)
    except docker_errors.ImageNotFound:
        return None


def _try_pull(client: Any, ref: str, timeout: float, progress: Progress | None) -> bool:
    """Pull ``ref`` in a thread with a deadline; False when it fails or runs late."""
    if ref in _pull_failed:
        return False
    _say(progress, f"pulling {ref} (up to {timeout:g} s)")
    outcome: dict[str, bool] = {}

    def pull() -> None:
        docker_errors = process.docker_sdk().errors

        try:
            repo, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
            client.api.pull(repo, tag=tag)
            outcome["ok"] = True
        except docker_errors.DockerException:
            outcome["ok"] = False

    worker = threading.Thread(target=pull, daemon=True)  # daemon: a hung pull must not block exit
    worker.start()
    worker.join(timeout)
    if not outcome.get("ok"):
        _pull_failed.add(ref)
        _say(progress, f"cannot pull {ref}; using a local base")
        return False
    return True


def resolve_base(*, client: Any | None = None, progress: Progress | None = None,
                 allow_bootstrap: bool = True) -> str:
    """The base image reference to build FROM, creating it with debootstrap when needed.

    Returns:
        ``$AGENTUNIT_BASE_IMAGE``, ``debian:bookworm-slim`` or ``agentunit-gym/base:bookworm``.

    Raises:
        ImageBuildError: no base exists, none can be pulled, and bootstrapping is not possible.
    """
    docker = _client(client)
    override = os.environ.get(BASE_ENV)
    if override:
        if _image_id(docker, override) is None and not _try_pull(docker, override, _PULL_TIMEOUT_S, progress):
            raise ImageBuildError(
                f"{BASE_ENV}={override!r} is not on this Docker daemon and cannot be pulled. "
                f"Load it (docker load), unset {BASE_ENV}, or run `agentunit-gym images bootstrap`."
            )
        return override
    if _image_id(docker, DEFAULT_BASE) is not None:
        return DEFAULT_BASE
    if _image_id(docker, BOOTSTRAP_BASE) is not None:
        return BOOTSTRAP_BASE
    if _try_pull(docker, DEFAULT_BASE, _PULL_TIMEOUT_S, progress):
        return DEFAULT_BASE
    if not allow_bootstrap:
        raise ImageBuildError(f"no base image: neither {DEFAULT_BASE} nor {BOOTSTRAP_BASE} exists.")
    return bootstrap_base(client=docker, progress=progress)


def image_tag(name: str, *, client: Any | None = None, root: Path | None = None,
              base: str | None = None) -> str:
    """The tag image ``name`` has when built from the current context and base.

    Raises:
        ConfigError: unknown image. ImageBuildError: no base image can be found or made.
    """
    docker = _client(client)
    base_ref = base if base is not None else resolve_base(client=docker)
    base_id = _image_id(docker, base_ref) or base_ref
    digest = context_hash(image_dir(name, root=root), extra=(base_id,))
    return f"agentunit-gym/{name}:{digest[:12]}"


def build_image(name: str, *, client: Any | None = None, progress: Progress | None = None,
                root: Path | None = None, nocache: bool = False, timeout: float = _BUILD_TIMEOUT_S) -> str:
    """Build image ``name`` (whether or not it exists) and return its tag.

    Args:
        name: directory under the images root.
        client: a Docker client (default: :func:`agentunit_gym.backends.process.docker_client`).
        progress: called with each line of build output.
        root: images root (default: the package's ``images/``).
        nocache: build without Docker's layer cache.
        timeout: overall deadline in seconds.

    Raises:
        ImageBuildError: the build failed (the message holds the failing step's log tail)
            or ran past ``timeout``.
    """
    docker_errors = process.docker_sdk().errors

    docker = _client(client)
    context = image_dir(name, root=root)
    base = resolve_base(client=docker, progress=progress)
    base_id = _image_id(docker, base) or base
    digest = context_hash(context, extra=(base_id,))
    tag = f"agentunit-gym/{name}:{digest[:12]}"
    _say(progress, f"building {tag} from {base}")
    labels = {LABEL: "1", HASH_LABEL: digest, NAME_LABEL: name, BASE_LABEL: base}
    tail: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        stream = docker.api.build(path=str(context), tag=tag, buildargs={"BASE_IMAGE": base}, labels=labels,
                                  rm=True, forcerm=True, pull=False, nocache=nocache, decode=True)
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                log = "".join(tail[-_LOG_TAIL:])
                raise ImageBuildError(
                    f"building image {name!r} ({tag}) failed: {str(detail).strip()}\n--- build log tail ---\n{log}"
                )
            line = chunk.get("stream") or chunk.get("status")
            if line:
                tail.append(line if line.endswith("\n") else line + "\n")
                del tail[:-_LOG_TAIL * 4]
                _say(progress, line.rstrip("\n"))
            if time.monotonic() > deadline:
                raise ImageBuildError(f"building image {name!r} took longer than {timeout:g} s; "
                                      "check the network to the Debian mirror, or raise the timeout.")
    except (docker_errors.APIError, docker_errors.DockerException) as exc:
        if isinstance(exc, docker_errors.APIError) and exc.status_code is not None and exc.status_code < 500:
            raise ImageBuildError(f"the Docker daemon refused to build {name!r}: {exc}") from exc
        raise ImageBuildError(f"building image {name!r} failed: {exc}\n{''.join(tail[-_LOG_TAIL:])}") from exc
    if _image_id(docker, tag) is None:
        raise ImageBuildError(f"the build of {name!r} finished without producing {tag}:\n{''.join(tail[-_LOG_TAIL:])}")
    _say(progress, f"built {tag}")
    _prune_stale(docker, name, keep=tag)
    return tag


def _prune_stale(client: Any, name: str, keep: str) -> None:
    """Remove older builds of ``name``; Docker refuses (and we skip) those a container still uses."""
    docker_errors = process.docker_sdk().errors

    for image in client.images.list(filters={"label": [f"{LABEL}=1", f"{NAME_LABEL}={name}"]}):
        if keep in image.tags:
            continue
        try:
            client.images.remove(image.id, force=False, noprune=False)
        except docker_errors.APIError:
            continue  # in use, or removed by someone else meanwhile


def ensure_image(name: str, *, client: Any | None = None, progress: Progress | None = None,
                 rebuild: bool = False, root: Path | None = None) -> str:
    """The tag of image ``name``, building it when missing or stale.

    Cheap after the first call in a process (the answer is cached per name, root and base).

    Args:
        name: image directory name (``"os"``, ``"mariadb"``...).
        client: a Docker client (default: the environment's daemon).
        progress: called with progress lines while building.
        rebuild: build even when an image with the current tag exists.
        root: images root (default: the package's ``images/``).

    Raises:
        BackendUnavailableError: no Docker daemon. ImageBuildError: the build failed.
        ConfigError: unknown image.
    """
    docker = _client(client)
    # Keyed by the context's own hash too, so an edited Dockerfile is noticed in a live process.
    key = (name, context_hash(image_dir(name, root=root)), os.environ.get(BASE_ENV, ""))
    with _lock:
        if not rebuild and key in _ensured and _image_id(docker, _ensured[key]) is not None:
            return _ensured[key]
        if progress is None:
            progress = _FirstUseNotice(name)
        base = resolve_base(client=docker, progress=progress)
        tag = image_tag(name, client=docker, root=root, base=base)
        if rebuild or _image_id(docker, tag) is None:
            tag = build_image(name, client=docker, progress=progress, root=root, nocache=False)
        _ensured[key] = tag
        return tag


class _FirstUseNotice:
    """Progress for builds nobody asked to watch (an env's first use): one warning that says a
    build is under way and how to watch it, every build line at debug level."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.warned = False

    def __call__(self, line: str) -> None:
        if not self.warned:
            self.warned = True
            logger.warning("preparing the %r image on first use (this can take a few minutes; "
                           "`agentunit-gym images build` shows the progress): %s", self.name, line)
        else:
            logger.debug("%s", line)


def bootstrap_base(*, client: Any | None = None, progress: Progress | None = None,
                   tag: str = BOOTSTRAP_BASE, mirror: str = DEBIAN_MIRROR, suite: str = "bookworm",
                   timeout: float = _BOOTSTRAP_TIMEOUT_S) -> str:
    """Create the base image from Debian packages: debootstrap (minbase) then ``docker import``.

    For machines that cannot pull from a registry but reach a Debian mirror (or a local one).

    Returns:
        ``tag``.

    Raises:
        ImageBuildError: debootstrap is missing, we are not root, or a step failed.
    """
    docker = _client(client)
    if process.which("debootstrap") is None:
        raise ImageBuildError(
            "cannot create the base image: debootstrap is not installed. Install it "
            "(apt-get install debootstrap), or load a Debian image into Docker (docker load) and set "
            f"{BASE_ENV} to its name."
        )
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root: run `sudo agentunit-gym images bootstrap`.")
    workdir = Path(tempfile.mkdtemp(prefix="agentunit-bootstrap-"))
    try:
        rootfs = workdir / "rootfs"
        _say(progress, f"debootstrap --variant=minbase {suite} from {mirror} (a few minutes)")
        done = process.run(["debootstrap", "--variant=minbase", suite, str(rootfs), mirror], timeout=timeout)
        if done.returncode != 0:
            log = (done.stdout + done.stderr).decode("utf-8", "replace").splitlines()[-_LOG_TAIL:]
            raise ImageBuildError(f"debootstrap failed (exit {done.returncode}):\n" + "\n".join(log))
        # Keep the image small: the package cache is not needed once installed.
        shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tarball = workdir / "rootfs.tar"
        _say(progress, "packing the root filesystem")
        packed = process.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."],
                             timeout=600.0)
        if packed.returncode != 0:
            raise ImageBuildError(f"tar failed: {packed.stderr.decode('utf-8', 'replace')[-2000:]}")
        _say(progress, f"importing as {tag}")
        repository, _, version = tag.rpartition(":")
        docker.api.import_image_from_file(
            str(tarball), repository=repository, tag=version,
            changes=[f"LABEL {LABEL}=1", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     'CMD ["bash"]'],
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if _image_id(docker, tag) is None:
        raise ImageBuildError(f"docker import did not produce {tag}")
    _say(progress, f"created {tag}")
    return tag


def list_images(*, client: Any | None = None, root: Path | None = None) -> list[ImageInfo]:
    """Our images on the daemon (label ``agentunit_gym=1``), each marked current or stale."""
    docker = _client(client)
    try:
        base = resolve_base(client=docker, allow_bootstrap=False)
    except ImageBuildError:
        base = None
    current: set[str] = set()
    for name in available_images(root=root):
        if base is not None and not (root is None and _unprepared(name)):  # never built here: not current
            current.add(image_tag(name, client=docker, root=root, base=base))
    found = []
    for image in docker.images.list(filters={"label": f"{LABEL}=1"}):
        labels = image.labels or {}
        tags = tuple(image.tags)
        found.append(ImageInfo(
            name=labels.get(NAME_LABEL, tags[0].split(":")[0] if tags else ""),
            tags=tags, id=image.short_id, content_hash=labels.get(HASH_LABEL, ""),
            base=labels.get(BASE_LABEL, ""), size_bytes=int(image.attrs.get("Size", 0)),
            current=any(t in current for t in tags),
        ))
    return sorted(found, key=lambda i: (i.name, i.tags))


def cleanup(*, client: Any | None = None, images: bool = False,
            only_labels: dict[str, str] | None = None) -> CleanupReport:
    """Remove every container labelled ``agentunit_gym=1`` (running or not), and our images too
    when ``images`` is set. The bootstrapped base image is kept: it is slow to recreate.

    Args:
        client: a Docker client (default: the environment's daemon).
        images: also remove images labelled ``agentunit_gym=1``.
        only_labels: restrict to containers and images that also carry these labels.

    Raises:
        BackendUnavailableError: no Docker daemon.
    """
    docker_errors = process.docker_sdk().errors

    docker = _client(client, timeout=120.0)
    filters = {"label": [f"{LABEL}=1", *(f"{k}={v}" for k, v in (only_labels or {}).items())]}
    removed: list[str] = []
    for container in docker.containers.list(all=True, filters=filters):
        try:
            container.remove(force=True)
            removed.append(container.name)
        except docker_errors.NotFound:
            continue  # removed meanwhile (auto-remove, another cleanup)
        except docker_errors.APIError as exc:
            raise BackendUnavailableError(f"could not remove container {container.name}: {exc}") from exc
    gone: list[str] = []
    if images:
        for image in docker.images.list(filters=filters):
            if BOOTSTRAP_BASE in image.tags:
                continue
            try:
                docker.images.remove(image.id, force=True)
                gone.append(image.tags[0] if image.tags else image.short_id)
            except docker_errors.NotFound:
                continue
        with _lock:
            _ensured.clear()
    return CleanupReport(tuple(removed), tuple(gone))
