"""The local sandboxes of one process share one ``/etc`` template: built once, never writable
by an agent, and each box still gets its own copy of what it may change."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentunit_gym.backends.sandbox.local import (
    ROOT_CALLER_UID,
    LocalSandbox,
    release_etc_template,
    shared_etc_template,
)

MECHANISMS = [pytest.param("bwrap", id="bwrap"), pytest.param("unshare", id="unshare")]


@pytest.fixture(params=MECHANISMS)
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[LocalSandbox, LocalSandbox]]:
    first, second = LocalSandbox(isolation=request.param), LocalSandbox(isolation=request.param)
    try:
        first.start()
        second.start()
        yield first, second
    finally:
        first.close()
        second.close()


def template_of(sb: LocalSandbox) -> Path | None:
    info = sb.box_info()
    return info.etc_template if info is not None else None


def test_sandboxes_of_one_process_share_the_template(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    first, second = pair
    etc = template_of(first)
    assert etc is not None and etc == template_of(second)
    assert first.host_dir is not None and not etc.is_relative_to(first.host_dir)
    # A different network setting has its own template (its resolv.conf differs).
    other = shared_etc_template(etc.parent.parent, ROOT_CALLER_UID if os.geteuid() == 0 else None, True)
    assert other != etc
    release_etc_template(other)
    assert not other.exists()


def test_the_last_sandbox_out_removes_the_template() -> None:
    first, second = LocalSandbox(), LocalSandbox()
    first.start()
    second.start()
    template = template_of(first)
    assert template is not None and template == template_of(second)
    first.close()
    assert template.is_dir() and second.shell("cat /etc/hostname").output == "sandbox\n"
    second.close()
    assert not template.parent.exists()


def test_an_agent_cannot_change_the_shared_template(pair: tuple[LocalSandbox, LocalSandbox]) -> None:
    first, second = pair
    etc = template_of(first)
    assert etc is not None
    before = sorted(os.listdir(etc / "ssl" / "certs"))
    # The bound trees are read-only; the copied files are the box's own.
    denied = first.shell("touch /etc/ssl/certs/planted && echo wrote")
    assert "wrote" not in denied.output and denied.exit_code != 0
    assert first.shell("echo 'mallory:x:0:0::/root:/bin/bash' >> /etc/passwd").ok
    assert "mallory" in first.shell("cat /etc/passwd").output
    assert "mallory" not in second.shell("cat /etc/passwd").output
    assert "mallory" not in (etc / "passwd").read_text()
    assert sorted(os.listdir(etc / "ssl" / "certs")) == before
    first.reset()
    assert "mallory" not in first.shell("cat /etc/passwd").output


def test_the_template_goes_when_the_process_exits(tmp_path: object) -> None:
    script = ("from agentunit_gym.backends.sandbox.local import LocalSandbox\n"
              "sb = LocalSandbox(); sb.start(); print(sb.box_info().etc_template.parent, flush=True)\n")  # never closed
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    holder = out.stdout.strip().splitlines()[-1]
    assert "agentunit-gym-etc-" in holder and not os.path.exists(holder)


def test_sandboxes_starting_side_by_side_walk_the_system_dirs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from agentunit_gym.backends.sandbox import local

    walks: list[str] = []
    real_walk = os.walk

    def counting_walk(top: str, *args: object, **kwargs: object) -> object:
        walks.append(top)
        return real_walk(top, *args, **kwargs)  # type: ignore[arg-type]

    local._find_masked_system_dirs.cache_clear()
    monkeypatch.setattr(os, "walk", counting_walk)
    try:
        with ThreadPoolExecutor(8) as pool:
            found = set(pool.map(lambda _: local.masked_system_dirs(), range(8)))
    finally:
        local._find_masked_system_dirs.cache_clear()
    assert len(found) == 1  # every caller got the one result
    tops = [top for top, link in local.system_layout() if link is None]
    assert sorted(walks) == sorted(tops)  # each system dir walked once, not once per caller


def test_a_small_dev_shm_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Docker container's /dev/shm is 64 MiB by default: a few sandboxes would fill it.
    import tempfile

    from agentunit_gym.backends.sandbox import local

    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(local.etc_template, "_is_tmpfs", lambda path: True)
    real = os.statvfs

    def sized(free_bytes: int) -> object:
        def statvfs(path: object) -> object:
            st = real(path)  # type: ignore[arg-type]
            if str(path) != "/dev/shm":
                return st
            return os.statvfs_result((st.f_bsize, 4096, st.f_blocks, free_bytes // 4096, free_bytes // 4096,
                                      st.f_files, st.f_ffree, st.f_favail, st.f_flag, st.f_namemax))
        return statvfs

    monkeypatch.setattr(os, "statvfs", sized(64 << 20))
    assert local.default_temp_parent() == Path(tempfile.gettempdir())
    if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_mode & 0o1777 == 0o1777:
        monkeypatch.setattr(os, "statvfs", sized(8 << 30))
        assert local.default_temp_parent() == Path("/dev/shm")
    monkeypatch.setenv("TMPDIR", tempfile.gettempdir())
    assert local.default_temp_parent() == Path(tempfile.gettempdir())
