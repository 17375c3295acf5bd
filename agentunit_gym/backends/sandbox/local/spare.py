"""New boxes (dirs, holder, a ready shell), and the warm spare: the next box, built in the
background for a reset that cannot be done in place."""

from __future__ import annotations

import logging
import tempfile
from concurrent.futures import Future
from pathlib import Path

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.local import box_tmpfs
from agentunit_gym.backends.sandbox.local.box import (
    _KILL_TIMEOUT_S,
    _START_TIMEOUT_S,
    _Box,
    _Boxes,
)
from agentunit_gym.backends.sandbox.local.hostfs import (
    _chown_tree,
    _rmtree,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    WRITABLE_DIRS,
)
from agentunit_gym.backends.sandbox.local.oneoff import _OneOffs
from agentunit_gym.backends.sandbox.local.procfs import (
    _mount_points,
)
from agentunit_gym.backends.sandbox.local.reset import _InPlaceReset
from agentunit_gym.backends.sandbox.local.setup import _Setup
from agentunit_gym.backends.sandbox.local.shell import _AgentShell
from agentunit_gym.errors import BackendError

logger = logging.getLogger("agentunit_gym")


class _Spares:
    """New boxes, and the warm spare: the next box, built in the background."""

    def __init__(self, setup: _Setup, boxes: _Boxes, shells: _AgentShell, resets: _InPlaceReset,
                 one_offs: _OneOffs) -> None:
        self.setup, self.boxes, self.shells, self.resets, self.one_offs = setup, boxes, shells, resets, one_offs
        self.spare: Future[_Box] | None = None

    def launch(self) -> None:
        """Build the next box in the background (with ``warm_spare``)."""
        if self.setup.warm_spare and self.setup.mechanism != "none" and self.spare is None and not self.setup.closed:
            self.spare = self.setup.in_background(self.make_box)

    def take(self) -> _Box | None:
        """The warm spare if it came up and is still alive; None otherwise (then a new box is made)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        try:
            box = spare.result(timeout=_START_TIMEOUT_S + _KILL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure of the spare means: make a box now
            logger.debug("local sandbox: warm spare unusable (%s); starting a new one", exc)
            return None
        if not self.boxes.box_alive(box) or box.shell is None or box.shell.proc.poll() is not None:
            self.boxes.stop_box(box)
            self.setup.in_background(_rmtree, box.dir)
            return None
        return box

    def make_box(self) -> _Box:
        """New private dirs, namespaces and a ready shell (runs in the background for spares)."""
        assert self.setup.root is not None
        box = _Box(Path(tempfile.mkdtemp(prefix="box-", dir=self.setup.root)))
        try:
            if self.setup.disk_bounded:  # every writable dir of the box on one tmpfs of `disk` bytes
                box_tmpfs.mount(box.dir, self.setup.limits.disk, uid=self.setup.owner_uid)
            (box.dir / "root").mkdir()  # the new root's mount point (unshare path)
            (box.dir / "w").mkdir()
            for d in WRITABLE_DIRS:
                box.writable(d).mkdir()
            self.resets.fill(box)
            if self.setup.owner_uid is not None:
                _chown_tree(box.dir, self.setup.owner_uid)
                if self.setup.multi_user:  # /home/agent is agent's, as in the docker image
                    usermap.give_homes(box.writable("/etc"), box.writable("/home"))
            if self.setup.mechanism != "none":
                try:
                    self.boxes.start_holder(box)
                except BackendError as exc:
                    # Seen once under heavy mount churn from a busy Docker daemon: try once more.
                    logger.warning("local sandbox: retrying start after: %s", exc)
                    self.boxes.stop_box(box)
                    self.boxes.start_holder(box)
                assert box.ns_pid is not None
                box.mounts = _mount_points(box.ns_pid)
                self.one_offs.start_spawner(box)  # before the agent ran anything here
            box.shell = self.shells.shell_ready(box)
        except BaseException:
            self.boxes.stop_box(box)
            _rmtree(box.dir)
            raise
        return box

