"""Tasks that need the network: what the AgentBench loader detects, the task field, and the
env that runs them only with ``network=True`` (for real, against a server on the host)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the ids
from agentunit_gym.domains.os.agentbench import load_agentbench_os
from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.network import network_commands
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.loader import load_tasks
from agentunit_gym.tasks.spec import NEEDS_NETWORK, left_out_note
from tests.domains.os.netkit import host_address, token_server


@pytest.mark.parametrize(("code", "language", "found"), [
    # The shapes AgentBench's own items use: apt in an init script, apt in the gold solution,
    # apt-get in an init file.
    ("apt update && apt install sudo -y && echo '' > /etc/sudoers", "bash", ["apt update", "apt install"]),
    ("#!/usr/bin/env bash\n\napt-get update && apt-get install -y net-tools iproute2 lsof", "bash",
     ["apt-get update", "apt-get install"]),
    ("DEBIAN_FRONTEND=noninteractive sudo apt-get -y -q install jq", "bash", ["apt-get install"]),
    ("if true; then\n  apk add curl\nfi", "bash", ["apk add"]),
    ("python3 -m pip install -r requirements.txt", "bash", ["pip install"]),
    ("sudo -u bob pip3 install requests", "bash", ["pip3 install"]),
    ("cd /srv && npm install", "bash", ["npm install"]),
    # Options with a value before the subcommand, and wrappers before the command.
    ("apt-get -o Acquire::Retries=3 install x; apt -t bookworm-backports install y", "bash",
     ["apt-get install", "apt install"]),
    ("nice -n 5 pip install requests", "bash", ["pip install"]),
    ("timeout -s KILL 60 wget https://example.org/f", "bash", ["wget https://example.org"]),
    ("sudo -s apt install x", "bash", ["apt install"]),
    ("wget -q 'https://example.org/a?x=1&y=2' -O /tmp/a", "bash", ["wget https://example.org"]),
    ("curl -sf http://198.51.100.7:8080/x | wc -c", "bash", ["curl http://198.51.100.7"]),
    ("git clone https://example.org/repo.git /srv/repo", "bash", ["git clone"]),
    ("bash -c 'apt-get update'", "bash", ["apt-get update"]),
    ("import subprocess\nsubprocess.run(['bash', '-c', 'pip install numpy'])", "python", ["pip install"]),
    # Offline: removals, loopback, local paths, comments, text that only mentions a command.
    ("apt remove sudo", "bash", []),
    ("apt -o Debug::X=1 remove y; timeout 5 sleep 1", "bash", []),
    ("apt list --installed | wc -l", "bash", []),
    ("curl -s http://127.0.0.1:8080/ && wget -q http://localhost/x && curl http://[::1]:80/", "bash", []),
    ("pip install ./pkg /tmp/x.whl && pip install --no-index x", "bash", []),
    ("git clone /srv/origin /tmp/copy", "bash", []),
    ("# apt-get install python\nls  # then curl https://example.org", "bash", []),
    ('echo "run apt-get install to fix it"', "bash", []),
    ("print('hello')", "python", []),
])
def test_network_commands(code: str, language: str, found: list[str]) -> None:
    assert network_commands(code, language) == found


def _item(description: str, init: Any = None, example: Any = None, start: Any = None) -> dict[str, Any]:
    item: dict[str, Any] = {"description": description, "labels": ["permission"]}
    if init is not None:
        item["create"] = {"local": "default", "init": init}
    if start is not None:
        item["start"] = start
    if example is None:
        item["evaluation"] = {"match": "ok"}
    else:
        item["evaluation"] = {"check": [{"code": "test -e /root/done"}], "example": example}
    return item


def write_network_checkout(root: Path) -> Path:
    """An AgentBench data/ folder whose items need the network the ways AgentBench's do."""
    base = root / "data" / "os_interaction"
    (base / "data" / "6").mkdir(parents=True)
    (base / "scripts" / "6" / "init").mkdir(parents=True)
    (base / "scripts" / "6" / "init" / "tools.sh").write_text(
        "#!/usr/bin/env bash\n\napt-get update && apt-get install -y net-tools\n")
    items = [
        _item("Repair sudo.", init={"code": "apt update && apt install sudo -y && echo '' > /etc/sudoers"}),
        _item("Bring sudo back.", init={"code": "apt remove sudo"},
              example={"code": "apt update && apt install sudo -y"}),
        _item("Which port is open?", init={"file": "init/tools.sh"}),
        _item("Offline: a local server.", start="python3 -m http.server 8000 --bind 127.0.0.1 &",
              example={"code": "curl -s http://127.0.0.1:8000/ > /dev/null; touch /root/done"}),
    ]
    (base / "data" / "6" / "pkg.json").write_text(json.dumps(items))
    return root / "data"


def test_the_agentbench_loader_marks_items_that_need_the_network(tmp_path: Path) -> None:
    tasks = {t.id: t for t in load_agentbench_os(write_network_checkout(tmp_path))}
    assert {i: t.needs_network for i, t in tasks.items()} == {
        "std-006-pkg-00000": True, "std-006-pkg-00001": True, "std-006-pkg-00002": True,
        "std-006-pkg-00003": False}
    assert tasks["std-006-pkg-00000"].network_note == "init: apt update, apt install"
    assert tasks["std-006-pkg-00001"].network_note == "example: apt update, apt install"
    assert tasks["std-006-pkg-00002"].network_note == "init: apt-get update, apt-get install"
    assert tasks["std-006-pkg-00003"].network_note is None
    reason = tasks["std-006-pkg-00000"].not_runnable("local", network=False)
    assert reason == f"{NEEDS_NETWORK}: init: apt update, apt install"
    assert tasks["std-006-pkg-00000"].not_runnable("local", network=True) is None
    assert tasks["std-006-pkg-00003"].not_runnable("local", network=False) is None
    assert left_out_note(list(tasks.values()), "local", network=False) == (
        "3 tasks that need the network left out: pass --network to run them")
    assert left_out_note(list(tasks.values()), "local", network=True) is None


def test_native_task_files_declare_it(tmp_path: Path) -> None:
    path = tmp_path / "net.yaml"
    path.write_text("- id: fetch\n  instruction: Fetch it.\n  needs_network: true\n"
                    "  network_note: downloads a page\n  evaluation: {match: ok}\n"
                    "- id: offline\n  instruction: Say ok.\n  evaluation: {match: ok}\n")
    fetch, offline = load_tasks(path, OSTask)
    assert (fetch.needs_network, fetch.network_note, offline.needs_network) == (True, "downloads a page", False)


def _fetch_task(address: str, port: int, **fields: Any) -> OSTask:
    return OSTask.model_validate({
        "id": "fetch-token", "instruction": "What does the file /root/token hold?", "needs_network": True,
        "init": [f"curl -sf --max-time 10 http://{address}:{port}/ -o /root/token"],
        "evaluation": {"check": [None, {"builtin": "string-match"}], "example": "cat /root/token"},
        "reference_solution": [{"bash": "cat /root/token"}, {"tool": "answer", "from_output": True}], **fields})


OFFLINE = OSTask.model_validate({"id": "say-ok", "instruction": "Say ok.", "evaluation": {"match": "ok"},
                                 "reference_solution": [{"answer": "ok"}]})


def test_an_env_without_the_network_leaves_such_tasks_out_and_refuses_them(tmp_path: Path) -> None:
    task = _fetch_task("198.51.100.7", 80)
    with OSEnv(backend="local", tasks=[task, OFFLINE]) as env:
        assert env.network is False
        assert [t.id for t in env.tasks] == ["say-ok"] and len(env.suite) == 2
        with pytest.raises(ConfigError, match="'fetch-token' needs the network.*network=True"):
            env.reset(options={"task_id": "fetch-token"})
    with OSEnv(backend="local", tasks=[task, OFFLINE], network=True) as env:
        assert env.network is True and [t.id for t in env.tasks] == ["fetch-token", "say-ok"]
    with pytest.raises(ConfigError, match="network must be True or False"):
        OSEnv(backend="local", network="yes")  # type: ignore[arg-type]


def test_gym_make_passes_network_to_the_sandbox() -> None:
    env = gym.make("AgentUnit/OS-v0", backend="local", network=True)
    try:
        assert env.unwrapped.network is True  # type: ignore[attr-defined]
        assert env.unwrapped.sandbox.network is True  # type: ignore[attr-defined]
    finally:
        env.close()
    env = gym.make("AgentUnit/OS-v0", backend="local")
    try:
        assert env.unwrapped.sandbox.network is False  # type: ignore[attr-defined]
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_with_the_network_the_task_reaches_a_host_server_and_without_it_nothing_does(backend: str) -> None:
    address = host_address(backend)
    with token_server("tok-51") as server:
        task = _fetch_task(address, server.port)
        with OSEnv(backend=backend, tasks=[task, OFFLINE], network=True) as env:
            env.reset(options={"task_id": "fetch-token"})
            assert server.hits, "the init script's download did not reach the host"
            env.step("Act: bash\n```bash\ncat /root/token\n```")
            assert env.step("Act: answer(tok-51)")[1] == 1.0
        hits = len(server.hits)
        with OSEnv(backend=backend, tasks=[task, OFFLINE]) as env:
            env.reset(options={"task_id": "say-ok"})
            attempt = env.admin_run(f"curl -sf --max-time 3 http://{address}:{server.port}/")
            assert attempt.details["exit_code"] not in (0, None) and "tok-51" not in attempt.observation
        assert len(server.hits) == hits
