"""``--network`` end to end: ``eval`` runs the tasks that need the network only with it (and
records it in config.json, the summary and the report); without it they are left out and
listed; a resume cannot change it; ``tasks check`` lists them as not run unless given it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentunit_gym.tasks.spec import NEEDS_NETWORK
from tests.cli.clitools import cli
from tests.domains.os.netkit import host_address, token_server


def _native_tasks(path: Path, address: str, port: int) -> Path:
    path.write_text(json.dumps([
        {"id": "fetch-token", "instruction": "What does /root/token hold?", "needs_network": True,
         "network_note": "downloads the token from the host",
         "init": [f"curl -sf --max-time 10 http://{address}:{port}/ -o /root/token"],
         "evaluation": {"check": [None, {"builtin": "string-match"}], "example": "cat /root/token"},
         "reference_solution": [{"bash": "cat /root/token"}, {"tool": "answer", "from_output": True}]},
        {"id": "say-ok", "instruction": "Say ok.", "evaluation": {"match": "ok"},
         "reference_solution": [{"answer": "ok"}]},
    ]), encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_eval_runs_network_tasks_only_with_network(tmp_path: Path, backend: str) -> None:
    with token_server("tok-77") as server:
        tasks = _native_tasks(tmp_path / "net.json", host_address(backend), server.port)
        online = tmp_path / "online"
        done = cli("eval", "--tasks", str(tasks), "--backend", backend, "--network", "--output", str(online),
                   cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert server.hits, "the task's init did not reach the host"
        assert json.loads((online / "config.json").read_text())["network"] is True
        records = [json.loads(line) for line in (online / "episodes.jsonl").read_text().splitlines()]
        assert sorted((r["task_id"], r["success"]) for r in records) == [("fetch-token", True), ("say-ok", True)]
        summary = json.loads((online / "summary.json").read_text())
        assert summary["config"]["network"] is True and summary["left_out"] == []
        assert "network on" in (online / "report.html").read_text()
        assert "network: on" in done.stdout

        hits = len(server.hits)
        offline = tmp_path / "offline"
        done = cli("eval", "--tasks", str(tasks), "--backend", backend, "--output", str(offline), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert len(server.hits) == hits  # nothing tried to reach it
    reason = f"{NEEDS_NETWORK}: downloads the token from the host"
    assert f"left out: AgentUnit/OS-v0 fetch-token: {reason}" in done.stderr
    assert "1 task(s) left out" in done.stderr.replace("\n", " ")
    assert json.loads((offline / "config.json").read_text())["network"] is False
    records = [json.loads(line) for line in (offline / "episodes.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == ["say-ok"]
    summary = json.loads((offline / "summary.json").read_text())
    assert summary["left_out"] == [{"env": "AgentUnit/OS-v0", "task": "fetch-token", "reason": reason}]
    assert summary["episodes"] == 1
    report = (offline / "report.html").read_text()
    assert "network off" in report and "Left out (1 tasks" in report and "fetch-token" in report


def test_a_resume_cannot_change_the_network_and_a_run_of_only_left_out_tasks_fails(tmp_path: Path) -> None:
    tasks = _native_tasks(tmp_path / "net.json", "198.51.100.7", 9)
    out = tmp_path / "run"
    first = cli("eval", "--tasks", str(tasks), "--backend", "local", "--quiet", "--output", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    refused = cli("eval", "--resume", "--output", str(out), "--network", cwd=tmp_path)
    assert refused.returncode == 2 and "other settings (network)" in refused.stderr
    same = cli("eval", "--resume", "--output", str(out), "--quiet", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert json.loads((out / "config.json").read_text())["network"] is False
    # Every task asked for needs the network: nothing runs, and the exit status says so.
    alone = cli("eval", "--tasks", str(tasks), "--backend", "local", "--task-id", "fetch-token", "--quiet",
                "--output", str(tmp_path / "alone"), cwd=tmp_path)
    assert alone.returncode == 1 and "nothing ran: every task of this run was left out (1)" in alone.stderr
    assert json.loads((tmp_path / "alone" / "summary.json").read_text())["left_out"][0]["task"] == "fetch-token"


def _agentbench_checkout(root: Path, address: str, port: int) -> Path:
    data = root / "data" / "os_interaction" / "data"
    data.mkdir(parents=True)
    (root / "data" / "os_interaction" / "scripts").mkdir()
    (data / "dev.json").write_text(json.dumps([
        {"description": "What does /root/token hold?",
         "create": {"local": "default", "init": {"code": f"curl -sf --max-time 10 http://{address}:{port}/ "
                                                         "-o /root/token"}},
         "evaluation": {"check": [None, {"language": "python", "code": "import sys\n"
                                         "sys.exit(sys.argv[1].strip() != sys.argv[2].strip())"}],
                        "example": {"code": "cat /root/token"}}},
        {"description": "Say ok.", "evaluation": {"match": "ok"}},
    ]), encoding="utf-8")
    return data.parent.parent


def test_tasks_check_lists_network_items_as_not_run_and_runs_them_with_network(tmp_path: Path) -> None:
    with token_server("tok-99") as server:
        address = host_address("local")
        checkout = _agentbench_checkout(tmp_path, address, server.port)
        listing = cli("tasks", "list", "--tasks", str(checkout), cwd=tmp_path)
        rows = {line.split("│")[1].strip(): line for line in listing.stdout.splitlines() if "dev-001-dev" in line}
        assert "all (needs network)" in rows["dev-001-dev-00000"] and "needs network" not in rows["dev-001-dev-00001"]
        without = cli("tasks", "check", str(checkout), "--backend", "local", "--json", cwd=tmp_path)
        assert without.returncode == 1, without.stderr
        assert not server.hits
        [row] = json.loads(without.stdout)["files"]
        assert [row[k] for k in ("loaded", "ran", "passed", "failed", "not_run")] == [2, 1, 1, 0, 1]
        [item] = row["not_run_items"]
        assert item == {"where": "dev-001-dev-00000", "reason": NEEDS_NETWORK,
                        "detail": f"init: curl http://{address}"}
        table = cli("tasks", "check", str(checkout), "--backend", "local", cwd=tmp_path)
        assert f"dev-001-dev-00000: {NEEDS_NETWORK} (init: curl http://{address})" in table.stdout
        with_network = cli("tasks", "check", str(checkout), "--backend", "local", "--network", "--json",
                           cwd=tmp_path)
        assert with_network.returncode == 0, with_network.stdout + with_network.stderr
        [row] = json.loads(with_network.stdout)["files"]
        assert [row[k] for k in ("loaded", "ran", "passed", "failed", "not_run")] == [2, 2, 2, 0, 0]
        assert server.hits
