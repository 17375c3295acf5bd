"""``agentunit-gym eval --ray``, for real: a head and a second node started with ``ray start`` on
this machine, a run across both, then a run in which the second node is killed mid-run.

Marked ``ray``: skipped when ray is not installed, a failure with ``AGENTUNIT_REQUIRE_RAY=1``
(set by scripts/test.sh, whose test extra installs ray). The episodes use the embedded
backends (SQLite, the local sandbox), so no Docker daemon is needed.
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.eval.record.records import read_records
from tests.cli.clitools import cli
from tests.eval.raynodes import RAY_ENV, RayNode, two_node_cluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SLOW_ORACLE = '''
import time

from agentunit_gym.eval.agents.builtin import OracleAgent


class SlowOracle(OracleAgent):
    """The oracle, thinking 0.3 s a turn: episodes stay in flight long enough to lose a node under them."""

    def act(self, observation, info):
        time.sleep(0.3)
        return super().act(observation, info)
'''

TIME_METRICS = {"wall_time", "time_to_success", "env_time", "agent_time", "env_time_share"}


def test_ray_local_starts_ray_in_the_eval_process_and_stops_it_after(tmp_path: Path) -> None:
    # Ray's session files under a folder of the test's own (short: Ray's socket paths must fit 107 bytes).
    ray_tmp = Path(tempfile.mkdtemp(prefix="rayl", dir="/tmp"))
    try:
        done = cli("eval", "--ray", "local", "--env", "DB-v0", "--backend", "sqlite", "-n", "3", "--concurrency", "2",
                   "--output", "run", "--quiet", cwd=tmp_path, timeout=240, env={**RAY_ENV, "RAY_TMPDIR": str(ray_tmp)})
        assert any(ray_tmp.rglob("session_*"))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    records = read_records(tmp_path / "run" / "episodes.jsonl")
    assert len(records) == 3 and all(r.status == "done" and r.success for r in records)
    assert len({r.node for r in records}) == 1 and records[0].node


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, RayNode, RayNode]]:
    with two_node_cluster() as nodes:
        yield nodes


def ray_cli(*args: str, cwd: Path, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    return cli(*args, cwd=cwd, timeout=timeout, env=RAY_ENV)


def lines_by_key(run_dir: Path) -> collections.Counter[str]:
    lines = (run_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    return collections.Counter(json.loads(line)["key"] for line in lines if line.strip())


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in summary["overall"]["metrics"].items() if k not in TIME_METRICS}


def test_a_run_spreads_over_both_nodes_and_reads_like_a_local_run(
        cluster: tuple[str, RayNode, RayNode], tmp_path: Path) -> None:
    address, _, _ = cluster
    options = ["--env", "DB-v0", "--env", "OS-v0", "--backend", "sqlite", "--backend", "local", "-n", "6",
               "--concurrency", "4", "--quiet"]
    done = ray_cli("eval", "--ray", address, *options, "--output", "on-ray", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "on-ray"
    records = read_records(run_dir / "episodes.jsonl")
    assert len(records) == 12 and set(lines_by_key(run_dir).values()) == {1}
    assert all(r.status == "done" and r.success for r in records), [r for r in records if not r.success]
    nodes = {r.node for r in records}
    assert len(nodes) == 2 and "" not in nodes, nodes  # both nodes ran episodes, each record says which
    assert all((run_dir / str(r.trace)).is_file() for r in records)

    local = ray_cli("eval", *options, "--output", "local", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    ray_summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    local_summary = json.loads((tmp_path / "local" / "summary.json").read_text(encoding="utf-8"))
    assert ray_summary["episodes"] == local_summary["episodes"] == 12
    assert comparable(ray_summary) == comparable(local_summary)
    assert {r.key for r in records} == {r.key for r in read_records(tmp_path / "local" / "episodes.jsonl")}
    # The tasks the local sandbox cannot run are listed the same way, from the node that listed them.
    assert ray_summary["left_out"] == local_summary["left_out"] and ray_summary["left_out"]
    assert json.loads((run_dir / "left_out.json").read_text(encoding="utf-8")) == ray_summary["left_out"]

    # The run folder is an ordinary run: a resume (here without Ray) finds nothing left to do.
    resumed = ray_cli("eval", "--resume", "--output", "on-ray", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "0 episodes run, 12 already done" in resumed.stderr
    assert (run_dir / "report.html").is_file()


def test_an_openai_agent_acts_on_the_nodes_with_the_key_passed_from_the_driver(
        cluster: tuple[str, RayNode, RayNode], tmp_path: Path) -> None:
    from agentunit_gym.eval.agents.fake_server import FakeChatServer

    address, _, _ = cluster
    reply = {"role": "assistant", "content": "Action: Answer\nFinal Answer: []"}
    with FakeChatServer(lambda body: reply) as server:
        # The nodes were started without this variable: only the driver has it.
        done = cli("eval", "--ray", address, "--env", "DB-v0", "--backend", "sqlite", "-n", "4", "--concurrency", "4",
                   "--agent", "openai:fake-model", "--base-url", server.base_url, "--api-key-env", "AGENTUNIT_RAY_KEY",
                   "--output", "run", "--quiet", cwd=tmp_path, timeout=240,
                   env={**RAY_ENV, "AGENTUNIT_RAY_KEY": "sk-on-the-driver"})
        headers = list(server.headers)
    assert done.returncode == 0, done.stderr
    records = read_records(tmp_path / "run" / "episodes.jsonl")
    assert len(records) == 4 and all(r.status == "done" and r.steps >= 1 for r in records), records
    chat = [h for h in headers if h.get("authorization")]
    assert len(chat) >= 4 and {h["authorization"] for h in chat} == {"Bearer sk-on-the-driver"}
    assert len({r.node for r in records}) == 2


def test_max_rps_holds_over_the_whole_cluster(cluster: tuple[str, RayNode, RayNode], tmp_path: Path) -> None:
    from agentunit_gym.eval.agents.fake_server import FakeChatServer

    address, _, _ = cluster
    reply = {"role": "assistant", "content": "Action: Answer\nFinal Answer: []"}
    with FakeChatServer(lambda body: reply) as server:
        done = cli("eval", "--ray", address, "--env", "DB-v0", "--backend", "sqlite", "-n", "12", "--concurrency", "4",
                   "--agent", "openai:fake-model", "--base-url", server.base_url, "--max-rps", "4",
                   "--no-endpoint-check", "--output", "run", "--quiet", cwd=tmp_path, timeout=240,
                   env={**RAY_ENV, "OPENAI_API_KEY": "sk-test"})
        arrivals = sorted(server.arrivals)
    assert done.returncode == 0, done.stderr
    assert len(arrivals) == 12
    # 2 requests a second on each of the 2 nodes: any 1 s holds at most 1 + 2 from each (a gate's first
    # request goes at once). Each node with the whole 4/s would put 5 in a second, 8-10 together.
    densest = max(sum(1 for t in arrivals if start <= t < start + 1.0) for start in arrivals)
    assert densest <= 6, arrivals
    assert len({r.node for r in read_records(tmp_path / "run" / "episodes.jsonl")}) == 2


# Last in the module: it kills the second node of the module's cluster.
def test_a_node_lost_mid_run_has_its_episodes_rerun_elsewhere_each_recorded_once(
        cluster: tuple[str, RayNode, RayNode], tmp_path: Path) -> None:
    address, _, second = cluster
    (tmp_path / "slow_oracle.py").write_text(SLOW_ORACLE, encoding="utf-8")
    run_dir = tmp_path / "run"
    environment = {**__import__("os").environ, **RAY_ENV, "COLUMNS": "200"}
    environment.pop("PYTHONPATH", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "agentunit_gym", "eval", "--ray", address, "--env", "DB-v0", "--backend", "sqlite",
         "-n", "24", "--concurrency", "4", "--agent", "./slow_oracle.py:SlowOracle", "--output", "run", "--quiet"],
        cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            # Kill once both nodes have finished episodes (so both are seen working) and most are still to run.
            so_far = read_records(run_dir / "episodes.jsonl")
            if len(so_far) >= 3 and len({r.node for r in so_far}) == 2:
                break
            time.sleep(0.1)
        assert process.poll() is None, "the run ended before the node could be killed"
        before_kill = {r.key for r in read_records(run_dir / "episodes.jsonl")}
        second.kill()  # the second node's raylet, workers and the actor, with episodes in flight there
        _, stderr = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert "lost" in stderr
    counts = lines_by_key(run_dir)
    assert len(counts) == 24 and set(counts.values()) == {1}, counts  # every episode recorded exactly once
    records = read_records(run_dir / "episodes.jsonl")
    assert all(r.status == "done" and r.success for r in records), [r for r in records if not r.success]
    assert len(before_kill) < 24
    # The episodes in flight on the lost node ran again elsewhere, through the infrastructure retry.
    retried = [r for r in records if r.attempts > 1]
    assert retried and len({r.node for r in retried}) == 1
    assert len({r.node for r in records}) == 2
