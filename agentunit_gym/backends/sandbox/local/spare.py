"""New boxes (dirs, holder, a ready shell), and the warm spare: the next box, built in the
background for a reset that cannot be done in place."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.local import box_tmpfs
from agentunit_gym.backends.sandbox.local.box import (
    _KILL_TIMEOUT_S,
    _START_TIMEOUT_S,
    _Box,
)
from agentunit_gym.backends.sandbox.local.hostfs import (
    _chown_tree,
    _rmtree,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    WRITABLE_DIRS,
)
from agentunit_gym.backends.sandbox.local.procfs import (
    _mount_points,
)
from agentunit_gym.backends.sandbox.local.reset import _ResetInPlace
from agentunit_gym.errors import BackendError

logger = logging.getLogger("agentunit_gym")


class _WarmSpare(_ResetInPlace):
    """New boxes, and the warm spare: the next box, built in the background."""

    def _launch_spare(self) -> None:
        if self.warm_spare and self.mechanism != "none" and self._spare is None and not self._closed:
            self._spare = self._in_background(self._make_box)

    def _take_spare(self) -> _Box | None:
        """The warm spare if it came up and is still alive; None otherwise (then a new box is made)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        try:
            box = spare.result(timeout=_START_TIMEOUT_S + _KILL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the spare means: make a box now
            logger.debug("local sandbox: warm spare unusable (%s); starting a new one", exc)
            return None
        if not self._box_alive(box) or box.shell is None or box.shell.proc.poll() is not None:
            self._stop_box(box)
            self._in_background(_rmtree, box.dir)
            return None
        return box

    def _make_box(self) -> _Box:
        """New private dirs, namespaces and a ready shell (runs in the background for spares)."""
        assert self._root is not None
        box = _Box(Path(tempfile.mkdtemp(prefix="box-", dir=self._root)))
        try:
            if self._disk_bounded:  # every writable dir of the box on one tmpfs of `disk` bytes
                box_tmpfs.mount(box.dir, self.limits.disk, uid=self._owner_uid)
            (box.dir / "root").mkdir()  # the new root's mount point (unshare path)
            (box.dir / "w").mkdir()
            for d in WRITABLE_DIRS:
                box.writable(d).mkdir()
            self._fill(box)
            if self._owner_uid is not None:
                _chown_tree(box.dir, self._owner_uid)
                if self._multi_user:  # /home/agent is agent's, as in the docker image
                    usermap.give_homes(box.writable("/etc"), box.writable("/home"))
            if self.mechanism != "none":
                try:
                    self._start_holder(box)
                except BackendError as exc:
                    # Seen once under heavy mount churn from a busy Docker daemon: try once more.
                    logger.warning("local sandbox: retrying start after: %s", exc)
                    self._stop_box(box)
                    self._start_holder(box)
                assert box.ns_pid is not None
                box.mounts = _mount_points(box.ns_pid)
                self._start_spawner(box)  # before the agent ran anything here
            box.shell = self._shell_ready(box)
        except BaseException:
            self._stop_box(box)
            _rmtree(box.dir)
            raise
        return box

