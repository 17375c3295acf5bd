"""Files: reading and writing them as the sandbox sees them."""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import stat
from pathlib import Path

from agentunit_gym.backends.sandbox.local.box import _Box, _Boxes
from agentunit_gym.backends.sandbox.local.isolation import (
    WRITABLE_DIRS,
)
from agentunit_gym.backends.sandbox.local.oneoff import _OneOffs
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.errors import BackendError
from agentunit_gym.images.os.shell_protocol import Capture


class _Files:
    """Reading and writing files as the sandbox sees them (its symlinks resolved in its view):
    on the host where they lie in the box's writable dirs, else by a one-off ``cat``."""

    def __init__(self, setup: _Setup, boxes: _Boxes, one_offs: _OneOffs) -> None:
        self.setup, self.boxes, self.one_offs = setup, boxes, one_offs

    def _resolve(self, box: _Box, path: str) -> str:
        """Resolve ``path`` as the sandbox sees it (symlinks followed inside the sandbox's view).

        Returns the sandbox path with every existing symlink component resolved; components
        that do not exist are kept as they are.
        """
        if not posixpath.isabs(path):
            path = posixpath.join(self.setup.workdir, path)
        todo = [p for p in path.split("/") if p]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in (".", ""):
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            current = "/" + "/".join([*done, part])
            host = self._host_view(box, current)
            if host is None:
                # Private mounts (/proc, /dev) or nothing at all: not resolved from out here.
                return "/" + "/".join([*done, part, *todo])
            if host.is_symlink():
                hops += 1
                if hops > 40:
                    raise OSError(40, "Too many levels of symbolic links", path)
                target = os.readlink(host)
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p] + todo
                continue
            done.append(part)
        return "/" + "/".join(done)

    def read_file(self, box: _Box, path: str, *, max_bytes: int) -> bytes:
        """The content of a file as the sandbox sees it.

        Raises:
            FileNotFoundError: no such file.
            IsADirectoryError: ``path`` is a directory.
            BackendError: the file is larger than ``max_bytes``.
        """
        resolved, host = self._locate(box, path)
        if self.setup.mechanism != "none":
            host = self._host_view(box, resolved)
            if host is None:
                return self._read_inside(box, resolved, max_bytes)
        assert host is not None
        with open(host, "rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise BackendError(f"{path} is larger than max_bytes={max_bytes}; pass a larger max_bytes to read it.")
        return data

    def _host_view(self, box: _Box, sandbox_path: str) -> Path | None:
        """The host file the sandbox sees at a normalised ``sandbox_path`` (its writable dirs and the
        read-only system dirs), or None for anything else (private mounts, or nothing)."""
        writable = box.map_writable(sandbox_path)
        if writable is not None:
            return writable
        for path, link in self.setup.layout:
            if sandbox_path == path or (link is None and sandbox_path.startswith(path + "/")):
                return Path(sandbox_path)
        return None

    def _locate(self, box: _Box, path: str) -> tuple[str, Path | None]:
        """``path`` as the sandbox resolves it, and the host file behind it when it is in a
        writable dir (without isolation: the host path itself)."""
        if self.setup.mechanism == "none":
            full = path if posixpath.isabs(path) else posixpath.join(self.boxes.workdir_in(box), path)
            return full, Path(full)
        resolved = self._resolve(box, path)
        return resolved, box.map_writable(resolved)

    def _read_inside(self, box: _Box, path: str, max_bytes: int) -> bytes:
        capture = Capture(max_bytes + 1)
        result = self.one_offs.exec(box, ["/bin/cat", "--", path], timeout=30.0, max_output=max_bytes + 1,
                                    capture=capture)
        if result.exit_code != 0:
            message = capture.text()
            if "No such file" in message:
                raise FileNotFoundError(2, "No such file or directory", path)
            if "Is a directory" in message:
                raise IsADirectoryError(21, "Is a directory", path)
            raise BackendError(f"could not read {path} in the sandbox: {message.strip()}")
        if capture.total > max_bytes:
            raise BackendError(f"{path} is larger than max_bytes={max_bytes}; pass a larger max_bytes to read it.")
        return bytes(capture.kept)

    def write_file(self, box: _Box, path: str, data: bytes, *, mode: int) -> None:
        """Create or replace a file in one of the writable dirs (parents are created).

        Raises:
            BackendError: ``path`` is outside the writable dirs (the host root is read-only here).
        """
        resolved, host = self._locate(box, path)
        if self.setup.mechanism != "none":
            if host is None:
                raise BackendError(
                    f"the local sandbox cannot write {path!r}" + (f" (resolves to {resolved!r})" if resolved != path
                                                                 else "")
                    + f": only {', '.join(WRITABLE_DIRS)} are writable, the rest is read-only. "
                    "Tasks that change other paths need backend 'docker' (list only 'docker' in the task's backends).")
        assert host is not None
        missing = [parent for parent in host.parents if not parent.exists()]
        host.parent.mkdir(parents=True, exist_ok=True)
        if self.setup.owner_uid is not None:  # what we create belongs to root inside
            for parent in missing:
                os.lchown(parent, self.setup.owner_uid, self.setup.owner_uid)
        # Replace atomically, and never follow a symlink planted at the final name.
        tmp = host.parent / f".agentunit-gym-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if self.setup.owner_uid is not None:
                os.chown(tmp, self.setup.owner_uid, self.setup.owner_uid)
            os.chmod(tmp, stat.S_IMODE(mode))
            os.replace(tmp, host)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
