"""AgentBench items that act as another user are marked ``needs_users``: they run on docker and
on a local sandbox that maps many users (started by root); where the sandbox maps one uid, a
run lists them as left out with the reason instead of failing them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentunit_gym.domains.os.agentbench import load_agentbench_os
from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.users import ONE_UID, user_commands
from agentunit_gym.tasks.spec import left_out_note
from tests.backends.test_local_users import many_users

CASES = [
    ("su - jack", ["su"]),
    ("echo hi | su jack -c whoami", ["su"]),
    ("runuser -u jack -- id", ["runuser"]),
    ("useradd -m jack && chown jack:jack /home/jack", ["chown jack:jack"]),
    ("chown -R 1000 /srv/data", ["chown 1000"]),
    ("chown -R root:root /srv; chown 0:0 f; chown root f", []),
    ("chgrp staff report.txt", ["chgrp staff"]),
    ("chgrp root report.txt", []),
    ("sudo -u jack touch /tmp/x", ["sudo -u jack"]),
    ("sudo --user=jack id", ["sudo -u jack"]),
    ("sudo -u root id; sudo ls /root", []),
    ("sudo su - jack", ["su"]),
    ("sudo -i", ["sudo -i"]),
    ("sudo -iu jack", ["sudo -u jack"]),
    ("sudo -ujack id; sudo -u#1000 id", ["sudo -u jack", "sudo -u #1000"]),
    ("sudo -u#0 id; sudo -n -u root id", []),
    ("bash -c 'su jack'", ["su"]),
    ("useradd -m jack; passwd -d jack; id jack", []),
    ("# su - jack\necho su; grep su /etc/shells", []),
]


@pytest.mark.parametrize(("code", "found"), CASES, ids=[c for c, _ in CASES])
def test_user_commands(code: str, found: list[str]) -> None:
    assert user_commands(code) == found


def test_python_scripts_are_read_as_string_literals() -> None:
    assert user_commands('import subprocess\nsubprocess.run("su - jack -c id", shell=True)', "python") == ["su"]
    assert user_commands("print('hello')", "python") == []


def _item(description: str, **fields: object) -> dict[str, object]:
    item: dict[str, object] = {"description": description, "evaluation": {"match": "ok"}, "labels": ["users"]}
    item.update(fields)
    return item


def test_the_agentbench_loader_marks_such_items_as_needing_users(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "data" / "os_interaction"
    (base / "data" / "7").mkdir(parents=True)
    items = [
        _item("Who am I?", create={"local": "default", "init": {"code": "useradd -m jack"}}, start="su - jack"),
        _item("Give it to jack.", create={"local": "default", "init": {"code": "useradd -m jack; touch /srv/f"}},
              evaluation={"check": [{"code": "test \"$(stat -c %U /srv/f)\" = jack"}],
                          "example": {"code": "chown jack /srv/f"}}),
        _item("Checked as jack.", evaluation={"check": [None, {"code": "su - jack -c 'cat ~/note'"}],
                                              "example": {"code": "echo hi"}}),
        _item("Root only.", create={"local": "default", "init": {"code": "useradd -m jack; chown root:root /srv"}}),
    ]
    (base / "data" / "7" / "users.json").write_text(json.dumps(items))
    tasks = {t.id: t for t in load_agentbench_os(tmp_path / "data")}
    assert {i: (t.needs_users, t.backends) for i, t in tasks.items()} == {
        "std-007-users-00000": (True, None), "std-007-users-00001": (True, None),
        "std-007-users-00002": (True, None), "std-007-users-00003": (False, None)}
    # Run where users can be switched: docker, or the local sandbox of a root caller.
    assert tasks["std-007-users-00000"].not_runnable("docker", network=False) is None
    # Left out where the sandbox maps one uid (a non-root caller's local sandbox, simulated),
    # with the reason: the OS env refuses them (it knows its sandbox), the task alone cannot tell.
    from agentunit_gym.backends.sandbox import usermap

    monkeypatch.setattr(usermap, "user_switching", lambda isolation="auto": usermap.Support(False, "one uid"))
    with OSEnv(backend="local", tasks=list(tasks.values())) as env:
        assert env.multi_user is False
        assert env.not_runnable(tasks["std-007-users-00000"]) == (
            f"not run on local: acts as another user (start: su); {ONE_UID}")
        assert env.not_runnable(tasks["std-007-users-00003"]) is None
        assert [t.id for t in env.tasks] == ["std-007-users-00003"]
        assert left_out_note(env.suite, "local", refused=env.refusals()) == (
            "3 tasks left out on backend local (switches users): it maps one uid here (run as root, or use "
            "--backend docker)")
    assert left_out_note(list(tasks.values()), "local") is None


@many_users
def test_user_items_run_on_a_root_callers_local_sandbox_with_the_oracle(tmp_path: Path) -> None:
    base = tmp_path / "data" / "os_interaction"
    (base / "data" / "6").mkdir(parents=True)
    items = [
        # Init gives a file to jack and ends in `su - jack` (no terminal there: it exits at once).
        _item("What does ~jack/run print?", labels=["user"], evaluation={"match": "k41"}, create={"init": {"code": (
            "useradd -s /bin/bash -m lee && cd /home/lee && echo 'echo k41' > run && chmod 000 run "
            "&& chown lee run && su - lee")}}),
        # The example changes groups, the check reads the file as each user with runuser.
        _item("Let ana and bo read /tmp/memo, not cy.", labels=["user"], create={"init": {"code": (
            "echo memo > /tmp/memo && for u in ana bo cy; do useradd -m $u; done")}},
            evaluation={"check": [{"code": "(runuser -l ana -c 'cat /tmp/memo' && runuser -l bo -c 'cat /tmp/memo' "
                                            "&& runuser -l cy -c 'cat /tmp/memo') | [ \"$(cat -)\" = "
                                            "\"memo\"$'\\n'\"memo\" ]"}],
                        "example": {"code": "groupadd rd && usermod -aG rd ana && usermod -aG rd bo "
                                            "&& chmod 640 /tmp/memo && chgrp rd /tmp/memo"}}),
    ]
    (base / "data" / "6" / "users.json").write_text(json.dumps(items))
    tasks = load_agentbench_os(tmp_path / "data")
    assert [t.needs_users for t in tasks] == [True, True]
    with OSEnv(backend="local", tasks=tasks) as env:
        assert env.multi_user and [t.id for t in env.tasks] == [t.id for t in tasks]
        for task in tasks:
            env.reset(options={"task_id": task.id})
            reward = 0.0
            for step in task.reference_solution:
                _, reward, terminated, _, info = env.step(env.render_action(step))
                if terminated:
                    break
            assert reward == 1.0, (task.id, info)
