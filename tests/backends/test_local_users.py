"""Many users in the local sandbox (``usermap``): a root caller's sandbox maps uids 0-65535 to
host 2000000000-2000065535, so ``su``, ``runuser``, ``chown jack`` work as on docker; any
other caller's sandbox maps one uid and ``su`` fails at once with a note."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.local import ROOT_CALLER_UID, USER_SWITCH_NOTE, LocalSandbox, cgroup
from agentunit_gym.errors import BackendError
from tests.backends.test_local_sandbox import no_cgroup_here
from tests.conftest import skip_without_cgroup

MECHANISMS = [pytest.param("bwrap", id="bwrap"), pytest.param("unshare", id="unshare")]
HOST_RANGE = range(usermap.BASE, usermap.BASE + usermap.COUNT)

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox maps many users (CI runs as root)")


def many_users_unavailable() -> str | None:
    """Why this machine cannot give a local sandbox many users (tests that need them are then
    skipped), None when it can. Checked from the machine's side (root, a writable pids
    cgroup, the range free), so that a regression in the mapping fails instead of skipping."""
    if os.geteuid() != 0:
        return "only a root caller's sandbox maps many users (CI runs as root)"
    if not cgroup.controller_available("pids"):
        return "no writable pids cgroup here: the local sandbox then maps one uid"
    if usermap.range_conflicts():
        return f"host ids from {usermap.BASE} are in use here: the local sandbox then maps one uid"
    return None


def skip_unless_many_users() -> None:
    """Skip the calling test where a local sandbox cannot map many users (a failure under
    AGENTUNIT_REQUIRE_CGROUP=1). For a parametrized case: a fixture mark cannot go in ``pytest.param``."""
    if (reason := many_users_unavailable()) is not None:
        skip_without_cgroup(reason)


def many_users(test: Callable[..., None]) -> Callable[..., None]:
    """Decorate a test that needs many users: it skips as :func:`skip_unless_many_users` does
    (a decorator, not a fixture mark, so that other test modules can import it)."""
    @functools.wraps(test)
    def checked(*args: Any, **kwargs: Any) -> None:
        skip_unless_many_users()
        test(*args, **kwargs)

    return checked


# ------------------------------------------------------------------ the decision


def test_the_range_is_the_root_callers_uid_and_the_next_65535() -> None:
    assert usermap.BASE == ROOT_CALLER_UID == 2_000_000_000
    assert usermap.map_lines() == "0 2000000000 65536\n"


def _host(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_a_free_range_has_no_conflicts(tmp_path: Path) -> None:
    root = _host(tmp_path, {
        "etc/subuid": "alice:100000:65536\n# comment\nbob:165536:65536\n",
        "etc/subgid": "alice:100000:65536\n",
        "etc/passwd": "root:x:0:0::/root:/bin/bash\nnobody:x:65534:65534::/:/usr/sbin/nologin\n",
        "etc/group": "root:x:0:\n",
        "proc/1/status": "Name:\tinit\nUid:\t0\t0\t0\t0\n",
        "proc/77/status": f"Name:\tlauncher\nUid:\t{usermap.BASE}\t{usermap.BASE}\t{usermap.BASE}\t{usermap.BASE}\n",
    })
    assert usermap.range_conflicts(root=root) == []


def test_every_kind_of_use_of_the_range_is_a_conflict(tmp_path: Path) -> None:
    inside = usermap.BASE + 1000
    root = _host(tmp_path, {
        # A range that starts below ours and reaches into it; one that starts at its last id.
        "etc/subuid": f"alice:{usermap.BASE - 10}:11\nbob:{usermap.BASE + usermap.COUNT - 1}:5\n"
                      f"carol:{usermap.BASE + usermap.COUNT}:10\n",
        "etc/subgid": f"dave:{usermap.BASE - 10}:10\n",  # ends just below: free
        "etc/passwd": f"svc:x:{inside}:100::/:/bin/false\n",
        "etc/group": f"grp:x:{usermap.BASE + usermap.COUNT - 1}:\n",
        "proc/55/status": f"Name:\td\nUid:\t0\t{inside}\t0\t0\n",
    })
    found = usermap.range_conflicts(root=root)
    assert found == [
        f"/etc/subuid: alice:{usermap.BASE - 10}:11", f"/etc/subuid: bob:{usermap.BASE + usermap.COUNT - 1}:5",
        f"/etc/passwd: svc ({inside})", f"/etc/group: grp ({usermap.BASE + usermap.COUNT - 1})",
        f"host process 55 runs as uid {inside}",
    ]


def test_a_non_root_caller_keeps_one_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    support = usermap.user_switching("auto")
    assert not support.ok and "not root" in support.reason and "newuidmap" in support.reason
    assert not usermap.user_switching("none").ok
    assert LocalSandbox().multi_user is False


@as_root
def test_a_range_in_use_on_the_host_keeps_one_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usermap, "range_conflicts", lambda *a, **k: ["/etc/subuid: x:2000000000:65536"])
    usermap._root_support.cache_clear()
    try:
        support = usermap.user_switching("auto")
        assert not support.ok and "in use" in support.reason and "/etc/subuid" in support.reason
        with LocalSandbox(isolation="unshare") as sb:
            assert sb.multi_user is False
            result = sb.shell("useradd jack && su - jack -c id", timeout=10)
            assert result.exit_code == 1 and USER_SWITCH_NOTE in result.output
    finally:
        usermap._root_support.cache_clear()


@as_root
def test_without_a_pids_cgroup_one_uid_is_mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    # RLIMIT_NPROC counts per uid: with many users it would not bound the sandbox.
    monkeypatch.setattr(cgroup, "find_hierarchies", no_cgroup_here)
    sb = LocalSandbox(isolation="unshare")
    assert sb.multi_user is False
    with sb:
        assert sb.multi_user is False
        assert sb.shell("cat /proc/self/uid_map").output.split() == ["0", str(ROOT_CALLER_UID), "1"]


@many_users
def test_the_prediction_before_start_holds() -> None:
    sb = LocalSandbox()
    predicted = sb.multi_user
    with sb:
        assert sb.multi_user is predicted is True


# ------------------------------------------------------------------ a root caller's sandbox


@pytest.fixture(scope="module", params=MECHANISMS)
def users_box(request: pytest.FixtureRequest) -> Iterator[LocalSandbox]:
    reason = many_users_unavailable()
    if reason is not None:
        skip_without_cgroup(reason)
    sb = LocalSandbox(isolation=request.param)
    sb.start()
    assert sb.mechanism == request.param and sb.multi_user
    yield sb
    sb.close()


@pytest.fixture
def box(users_box: LocalSandbox) -> LocalSandbox:
    users_box.reset()
    users_box.run("useradd -m -s /bin/bash jack")
    return users_box


def test_the_map_is_the_range(box: LocalSandbox) -> None:
    for name in ("uid_map", "gid_map"):
        assert box.shell(f"cat /proc/self/{name}").output.split() == ["0", str(usermap.BASE), str(usermap.COUNT)]


def test_su_and_runuser_switch_users(box: LocalSandbox) -> None:
    assert box.shell("su - jack -c id").output == "uid=1001(jack) gid=1001(jack) groups=1001(jack)\n"
    assert box.shell("su jack -c 'id -un; echo $HOME'").output == "jack\n/home/jack\n"
    assert box.shell("runuser -u jack -- id -un").output == "jack\n"
    # jack is not root: root's files stay closed to him.
    denied = box.shell("su jack -c 'touch /root/x'")
    assert denied.exit_code == 1 and "Permission denied" in denied.output and USER_SWITCH_NOTE not in denied.output


def test_su_nests_until_exit(box: LocalSandbox) -> None:
    box.shell("cd /tmp; export OUTER=kept")
    entered = box.shell("su - jack", timeout=10)
    assert (entered.output, entered.timed_out) == ("", False)  # entered at once: the shell is jack's
    assert box.shell('whoami; echo "$0"; pwd').output == "jack\n-bash\n/home/jack\n"
    assert box.shell("exit").exit_code == 0
    assert box.shell('whoami; pwd; echo "$OUTER"').output == "root\n/tmp\nkept\n"


def test_chown_chgrp_and_files_owned_by_users(box: LocalSandbox) -> None:
    out = box.shell("groupadd devs && echo x > /tmp/f && chown jack /tmp/f && chgrp devs /tmp/f "
                    "&& stat -c '%U %G' /tmp/f && su jack -c 'echo mine > /tmp/g' && stat -c '%U %u' /tmp/g")
    assert out.output == "jack devs\njack 1001\n"
    # On the host the files belong to the mapped uids (and gids) of the range.
    info = box.box_info()
    assert info is not None
    host_tmp = info.writable_dirs["/tmp"]
    f, g = os.stat(host_tmp / "f"), os.stat(host_tmp / "g")
    assert (f.st_uid, g.st_uid, g.st_gid) == (usermap.BASE + 1001, usermap.BASE + 1001, usermap.BASE + 1001)
    assert f.st_gid == usermap.BASE + int(box.shell("getent group devs | cut -d: -f3").output)
    # jack cannot take root's file, and root can take his back.
    assert box.shell("su jack -c 'chown jack /etc/hostname'").exit_code == 1
    assert box.shell("chown root:root /tmp/g && stat -c %U /tmp/g").output == "root\n"


@many_users
@pytest.mark.parametrize("mechanism", ["bwrap", "unshare"])
def test_the_templates_user_owns_its_home_in_new_and_reset_boxes(mechanism: str) -> None:
    with LocalSandbox(isolation=mechanism) as sb:  # type: ignore[arg-type]
        for _ in range(3):  # a new box, then reset in place, with and without a touched home
            out = sb.shell("stat -c '%U %G' /home/agent && su - agent -c 'touch ~/x && stat -c %U ~/x'")
            assert out.output == "agent agent\nagent\n"
            assert sb.shell("stat -c %U /home /root").output == "root\nroot\n"
            sb.reset()


def test_useradd_then_acting_as_the_user_across_the_images_users(box: LocalSandbox) -> None:
    # The /etc template's own user (agent, uid 1000) and a new one with a chosen uid.
    out = box.shell("useradd -u 4242 -m ana && su ana -c 'id -u; touch ~/note; stat -c %U ~/note' "
                    "&& su agent -s /bin/sh -c 'id -un'")
    assert out.output == "4242\nana\nagent\n"


def test_no_process_of_the_box_runs_as_a_host_uid_outside_the_range(box: LocalSandbox) -> None:
    box.shell("su jack -c 'sleep 300' > /dev/null 2>&1 & runuser -u jack -- sleep 301 & sleep 302 &")
    info = box.box_info()
    assert info is not None
    cgroup = info.pids_cgroup
    assert cgroup is not None  # every process of the sandbox is in it (the holders too)
    deadline = time.monotonic() + 5
    while True:
        pids = [int(x) for x in (cgroup / "cgroup.procs").read_text().split()]
        uids = {pid: usermap.uids_of(pid) for pid in pids}
        seen = {u for ids in uids.values() if ids for u in ids}
        if usermap.BASE + 1001 in seen or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert usermap.BASE + 1001 in seen  # jack's sleeps, as the host sees them
    assert len(uids) >= 5
    outside = {pid: ids for pid, ids in uids.items() if ids and any(u not in HOST_RANGE for u in ids)}
    assert outside == {}


def test_setuid_programs_do_not_raise_a_user(box: LocalSandbox) -> None:
    # Their owner (host root) is not mapped, so the kernel ignores the setuid bit: `newgrp`
    # run by jack cannot change his group (on docker it can). Root's own newgrp works.
    box.run("groupadd g2 && usermod -aG g2 jack")
    denied = box.shell("echo 'id -gn' | su jack -c 'newgrp g2'")
    assert "setgid: Operation not permitted" in denied.output and "g2" not in denied.output
    assert box.shell("echo 'id -gn' | newgrp g2").output == "g2\n"
    # Nor does a program made setuid inside: the agent's processes have no_new_privs.
    out = box.shell("cp /usr/bin/id /tmp/id && chmod 4755 /tmp/id && su jack -c '/tmp/id -u'")
    assert out.output == "1001\n"


def test_reset_drops_the_users(box: LocalSandbox) -> None:
    box.reset()
    result = box.shell("id jack; su - jack -c id")
    assert result.exit_code == 1 and "no such user" in result.output


def test_reset_gives_the_writable_dirs_back_to_root(box: LocalSandbox) -> None:
    # Root may give the top dirs, and the dirs holding /etc's read-only trees, to a user; a
    # reset in place takes them back (the box is kept).
    kept = box.box_info().box_dir  # type: ignore[union-attr]
    dirs = "/tmp /etc /root /home /var /run /etc/ssl"
    assert box.shell(f"chown jack:jack {dirs} && stat -c %U {dirs} | sort -u").output == "jack\n"
    box.reset()
    assert box.box_info().box_dir == kept  # type: ignore[union-attr]
    assert box.shell(f"stat -c '%U %G' {dirs} | sort -u").output == "root root\n"


# ------------------------------------------------------------------ failing closed


@many_users
def test_an_unmapped_namespace_never_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # If the maps were not written, the gate is not root in its namespace and stops: the
    # sandbox refuses to start rather than run anything unmapped.
    monkeypatch.setattr(usermap, "write_maps", lambda pid, *a: None)
    for mechanism in ("unshare", "bwrap"):
        sb = LocalSandbox(isolation=mechanism, warm_spare=False)
        with pytest.raises(BackendError, match="did not start"):
            sb.start()
        sb.close()


@many_users
def test_a_refused_map_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, *args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(usermap, "write_maps", refuse)
    sb = LocalSandbox(isolation="unshare", warm_spare=False)
    with pytest.raises(BackendError, match="could not map the local sandbox's users"):
        sb.start()
    sb.close()


def test_a_fork_bomb_as_jack_is_contained(box: LocalSandbox) -> None:
    # Other users' processes count against the same pids cgroup, and the runaway killer (host
    # root) ends them after the command, as it does root's.
    box.shell("sleep 300 &")
    bomb = box.shell("su jack -c ':(){ :|:& };:'", timeout=5)
    assert "processes this command left running were killed" in bomb.output
    # Nothing of jack's is left to bog the box down, and it answers.
    assert box.shell("pgrep -c -u jack || true").output == "0\n"
    for _ in range(3):
        assert box.shell("echo ok", timeout=5).output == "ok\n"
    assert box.shell("jobs | grep -c 'sleep 300'").output == "1\n"


def test_a_timeout_inside_su_keeps_jacks_shell(box: LocalSandbox) -> None:
    assert box.shell("su - jack", timeout=10).exit_code == 0
    hung = box.shell("sleep 1000", timeout=1)
    assert hung.timed_out
    assert box.shell("whoami").output == "jack\n"
    assert box.shell("exit").exit_code == 0 and box.shell("whoami").output == "root\n"


def _readable_by_others(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o005 == 0o005 for p in [*path.parents, path] if p != path) \
        and os.stat(path).st_mode & 0o004 != 0


@as_root
def test_a_real_non_root_caller_is_refused_with_the_reason() -> None:
    # usermap needs only the standard library: run its decision as nobody, for real.
    import shutil
    import subprocess
    import sys

    source = Path(usermap.__file__)
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    if not _readable_by_others(source) or not _readable_by_others(Path(python)):
        pytest.skip("the checkout or a python is not readable by other users here")
    code = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('usermap', sys.argv[1])\n"
            "m = sys.modules['usermap'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "s = m.user_switching('auto'); print(s.ok, s.reason)\n")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", python, "-c", code,
                           str(source)], capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("False the caller is not root: mapping more than its own uid would need newuidmap")
