"""The sandboxes' resource limits: parsing and defaults (pure), the cgroup a local box gets,
and what the OS env reports when a host cannot give them (the behaviour under load is in the
conformance suite: memory bomb, disk fill, fork bomb, CPU)."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.backends.sandbox.base import ExecResult
from agentunit_gym.backends.sandbox.limits import (
    DEFAULT_CPUS,
    DEFAULT_DISK,
    DEFAULT_MEMORY,
    DEFAULT_PIDS,
    Limits,
    add_memory_note,
    format_size,
    parse_size,
    resolve_limits,
)
from agentunit_gym.backends.sandbox.local import LocalSandbox, box_tmpfs, cgroup
from agentunit_gym.backends.sandbox.local.hostfs import _rmtree
from agentunit_gym.errors import ConfigError
from tests.conftest import skip_without_cgroup

# ------------------------------------------------------------------ parsing (pure)


@pytest.mark.parametrize(("text", "size"), [
    ("256m", 256 << 20), ("1g", 1 << 30), ("1G", 1 << 30), ("1.5GiB", 3 << 29), ("512 MB", 512 << 20),
    ("64k", 64 << 10), ("1048576", 1 << 20), (1 << 20, 1 << 20), (2.0 * (1 << 30), 2 << 30),
])
def test_sizes_parse_as_docker_writes_them(text: str | int | float, size: int) -> None:
    assert parse_size(text, "memory") == size


@pytest.mark.parametrize("text", ["lots", "", "-1g", "0", "1x", "g", "nan", True, float("inf")])
def test_a_size_that_does_not_parse_is_a_config_error_naming_the_option(text: object) -> None:
    with pytest.raises(ConfigError, match="^disk must be a"):
        parse_size(text, "disk")  # type: ignore[arg-type]


def test_defaults_are_one_place_for_both_backends() -> None:
    limits = resolve_limits()
    assert limits == Limits(memory=1 << 30, cpus=1.0, pids=512, disk=1 << 30)
    assert (DEFAULT_MEMORY, DEFAULT_CPUS, DEFAULT_PIDS, DEFAULT_DISK) == (1 << 30, 1.0, 512, 1 << 30)
    assert limits.cgroup_memory == 2 << 30  # files on tmpfs are memory too
    assert limits.describe() == "memory 1 GiB, disk 1 GiB, cpus 1, pids 512"


@pytest.mark.parametrize(("options", "message"), [
    ({"memory": "1m"}, "memory must be at least 32 MiB"),
    ({"disk": "1m"}, "disk must be at least 8 MiB"),
    ({"cpus": 0}, "cpus must be a number of cores"),
    ({"cpus": "fast"}, "cpus must be a number of cores"),
    ({"pids": 3}, "pids_limit must be a whole number of at least 16"),
    ({"pids": 1.5}, "pids_limit must be a whole number"),
])
def test_out_of_range_limits_are_config_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_limits(**options)  # type: ignore[arg-type]


def test_both_sandboxes_refuse_a_bad_limit_at_construction() -> None:
    with pytest.raises(ConfigError, match="memory must be a size"):
        LocalSandbox(memory="lots")
    from agentunit_gym.backends.sandbox.docker import DockerSandbox

    with pytest.raises(ConfigError, match="cpus must be"):
        DockerSandbox(cpus=-1, client=object())
    with pytest.raises(ConfigError, match="not both"):
        DockerSandbox(disk="1g", tmpfs_size="1g", client=object())


def test_format_size() -> None:
    assert [format_size(n) for n in (256 << 20, 1 << 30, 3 << 29, 1000)] == ["256 MiB", "1 GiB", "1.5 GiB", "1000 B"]


def test_the_memory_note_is_one_line_after_the_output_and_only_after_137() -> None:
    limits = resolve_limits(memory="256m")
    noted = add_memory_note(ExecResult("Killed", 137), limits)
    assert noted.output == "Killed\n[killed: the command went over the sandbox's memory limit (256 MiB)]\n"
    assert add_memory_note(ExecResult("done\n", 0), limits).output == "done\n"


# ------------------------------------------------------------------ the local box's cgroup


def test_a_local_box_gets_its_limits_written_in_its_cgroup() -> None:
    with LocalSandbox(memory="96m", disk="32m", cpus=0.25, pids_limit=100, warm_spare=False) as sb:
        if sb.limits_off:
            skip_without_cgroup(f"limits off on this host: {sb.limits_off}")
        info = sb.box_info()  # the files the kernel enforces: checked once here, from the host
        assert info is not None and set(info.cgroup_dirs) == {"memory", "cpu", "pids"}
        dirs = info.cgroup_dirs
        assert info.pids_cgroup == dirs["pids"] and info.process_limit == "cgroup"
        memory = dirs["memory"]
        expected = str((96 + 32) << 20)
        if (memory / "cgroup.controllers").exists():  # cgroup v2: one dir for all three
            assert (memory / "memory.max").read_text().strip() == expected
            assert (memory / "cpu.max").read_text().split() == ["25000", "100000"]
        else:
            assert (memory / "memory.limit_in_bytes").read_text().strip() == expected
            assert (dirs["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "25000"
        assert (dirs["pids"] / "pids.max").read_text().strip() == "100"
        # The box's processes are in it (holder, agent's shell); this process is not.
        assert sb.shell("echo up").output == "up\n"
        members = {int(pid) for path in set(dirs.values()) for pid in (path / "cgroup.procs").read_text().split()}
        assert len(members) >= 2 and all(Path(f"/proc/{pid}").exists() for pid in members)
        assert os.getpid() not in members
        dirs = dict(dirs)
    assert not any(path.exists() for path in dirs.values())  # close() removed it


def test_without_memory_and_cpu_cgroups_the_sandbox_warns_once_and_the_env_says_limits_are_off(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # The host's real pids cgroup stays (the RLIMIT_NPROC fallback counts every process of
    # the sandbox uid on the machine: other test runs' too); memory and cpu are "missing".
    real = cgroup.find_hierarchies

    def memory_and_cpu_missing(controllers: Iterable[str] = cgroup.CONTROLLERS, *,
                               enable: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
        found, missing = real(controllers, enable=enable)
        for name in ("memory", "cpu"):
            if name in found or name in missing:
                found.pop(name, None)
                missing[name] = "no cgroup here (test)"
        return found, missing

    monkeypatch.setattr(cgroup, "find_hierarchies", memory_and_cpu_missing)
    monkeypatch.setattr(cgroup, "_WARNED", set())
    caplog.set_level(logging.WARNING, logger="agentunit_gym")
    env = gym.make("AgentUnit/OS-v0", backend="local", memory="256m")
    try:
        _, info = env.reset(seed=0)
        off = info["backend_limits_off"]
        assert off.startswith("cpu: no cgroup here (test)") and "memory: no cgroup here (test)" in off
        _, _, _, _, step_info = env.step("Act: finish")
        assert step_info["backend_limits_off"] == off
        env.reset(seed=1)
    finally:
        env.close()
    warnings = [r.getMessage() for r in caplog.records if "To get them" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "systemd-run" in warnings[0] and "backend='docker'" in warnings[0]


def test_with_every_limit_the_env_reports_none_off() -> None:
    env = gym.make("AgentUnit/OS-v0", backend="local", memory="256m", disk="64m")
    try:
        _, info = env.reset(seed=0)
        sandbox = env.unwrapped.sandbox  # type: ignore[attr-defined]
        if sandbox.limits_off:
            skip_without_cgroup(f"limits off on this host: {sandbox.limits_off}")
        assert info["backend_limits_off"] == ""
        assert sandbox.limits == Limits(memory=256 << 20, cpus=1.0, pids=512, disk=64 << 20)
    finally:
        env.close()


def test_limit_options_with_an_existing_sandbox_are_refused() -> None:
    with LocalSandbox() as sb, pytest.raises(ConfigError, match="given with an existing sandbox"):
        gym.make("AgentUnit/OS-v0", sandbox=sb, memory="256m")


# ------------------------------------------------------------------ cgroup v2 and v1 layouts (a fake tree)


def _fake_host(monkeypatch: pytest.MonkeyPatch, root: Path, *, v2: list[str], delegated: list[str],
               v1: tuple[str, ...] = ()) -> None:
    """Our cgroup at /box.slice on a cgroup2 mount at ``root/unified`` offering ``v2`` and passing
    ``delegated`` on to children; ``v1`` controllers get hierarchies of their own under ``root``."""
    own = root / "unified" / "box.slice"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text(" ".join(v2))
    (own / "cgroup.subtree_control").write_text(" ".join(delegated))
    for name in v1:
        (root / name).mkdir()
    monkeypatch.setattr(cgroup, "_own_paths", lambda: ("/box.slice", {name: "/" for name in v1}))
    monkeypatch.setattr(cgroup, "_mounts", lambda: ([root / "unified"], {name: root / name for name in v1}))


def test_on_cgroup_v2_a_box_gets_memory_max_swap_0_cpu_max_and_pids_max(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_host(monkeypatch, tmp_path, v2=["cpu", "memory", "pids"], delegated=["cpu", "memory", "pids"])
    box = cgroup.BoxCgroup.create(resolve_limits(memory="256m", disk="64m", cpus=1.5, pids=99))
    assert box.missing == {} and set(box.versions.values()) == {2}
    (path,) = set(box.dirs.values())
    assert path.parent == tmp_path / "unified" / "box.slice" and path.name.startswith(f"agentunit_gym-{os.getpid()}-")
    assert (path / "memory.max").read_text() == str(320 << 20)
    assert (path / "memory.swap.max").read_text() == "0"
    assert (path / "cpu.max").read_text() == "150000 100000"
    assert (path / "pids.max").read_text() == "99"
    assert box.procs_files == (str(path / "cgroup.procs"),)
    (path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
    assert box.oom_kills() == 2


def test_on_cgroup_v1_each_controller_has_its_own_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_host(monkeypatch, tmp_path, v2=["hugetlb"], delegated=[], v1=("memory", "cpu", "pids"))
    box = cgroup.BoxCgroup.create(resolve_limits(memory="256m", disk="64m", cpus=0.5))
    assert box.missing == {} and set(box.versions.values()) == {1}
    assert {name: path.parent for name, path in box.dirs.items()} == {
        "memory": tmp_path / "memory", "cpu": tmp_path / "cpu", "pids": tmp_path / "pids"}
    assert (box.dirs["memory"] / "memory.limit_in_bytes").read_text() == str(320 << 20)
    assert (box.dirs["cpu"] / "cpu.cfs_quota_us").read_text() == "50000"
    assert (box.dirs["pids"] / "pids.max").read_text() == "512"
    assert len(box.procs_files) == 3
    (box.dirs["memory"] / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    assert box.oom_kills() == 5


def test_a_v2_cgroup_that_does_not_delegate_names_each_missing_controller(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_host(monkeypatch, tmp_path, v2=["cpu", "memory", "pids"], delegated=["pids"])
    (tmp_path / "unified" / "box.slice" / "cgroup.subtree_control").chmod(0o444)  # enabling fails too
    if os.geteuid() == 0:  # root writes a 0444 file: make the write a no-op instead
        monkeypatch.setattr(Path, "write_text", _no_subtree_writes(Path.write_text))
    box = cgroup.BoxCgroup.create(resolve_limits())
    assert box.controllers == {"pids"}
    assert set(box.missing) == {"memory", "cpu"}
    assert "does not delegate the memory controller" in box.missing["memory"]
    off = cgroup.limits_off(box, disk_bounded=True, mechanism="bwrap")
    assert set(off) == {"memory", "cpu"}


def _no_subtree_writes(write):  # type: ignore[no-untyped-def]
    def guarded(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if self.name == "cgroup.subtree_control":
            return 0
        return int(write(self, data, *args, **kwargs))
    return guarded


# ------------------------------------------------------------------ the box's tmpfs


@pytest.mark.skipif(not box_tmpfs.can_mount(), reason="mounting a tmpfs needs root (CAP_SYS_ADMIN)")
def test_a_box_tmpfs_is_bounded_and_removing_its_tree_unmounts_it(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    box_tmpfs.mount(box, 1 << 20)
    try:
        with pytest.raises(OSError) as full:
            (box / "fill").write_bytes(b"x" * (2 << 20))
        assert full.value.errno == errno.ENOSPC
        # Even when the record of it was lost (a removal cut short), the mount table finds it.
        box_tmpfs._mounted.discard(str(box))
        _rmtree(tmp_path)
        assert not tmp_path.exists()
        assert str(box) not in box_tmpfs._tmpfs_mount_points()
    finally:
        if str(box) in box_tmpfs._tmpfs_mount_points():
            box_tmpfs.unmount_under(box)
