"""A model endpoint that does not work fails loudly: checked before the first episode, a run
stopped when most episodes fail for one reason, a non-zero exit when every episode errored."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.record.records import read_records
from tests.cli.clitools import ROOT, cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_a_closed_port_fails_before_the_first_episode(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "3", "--agent", "openai:some-model",
               "--base-url", url, cwd=tmp_path)
    assert done.returncode != 0
    # One line from the probe before the first episode, not one failure per episode after retries.
    (line,) = done.stderr.strip().splitlines()
    assert url in line and "does not answer" in line and "Connection refused" in line and "--base-url" in line
    assert not (tmp_path / "results").exists()


def test_an_unresolvable_host_fails_with_its_url(tmp_path: Path) -> None:
    url = "http://no-such-model-host.invalid/v1"
    done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", "openai:m", "--base-url", url,
               cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode != 0 and url in done.stderr and "does not answer" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "results").exists()


def test_most_episodes_failing_for_one_reason_stop_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The endpoint answers the check, then refuses every chat turn (a model it does not serve).
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Act: answer(1)"}, failures=[404] * 50) as srv:
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "12", "--concurrency", "1",
                   "--agent", "openai:missing-model", "--base-url", srv.base_url, "--quiet", "--output", str(out),
                   cwd=tmp_path)
    assert done.returncode == 1
    assert "stopped early: 5 of the 5 episodes finished so far failed for the same reason" in done.stderr
    assert "404" in done.stderr and f"agentunit-gym eval --resume --output {out}" in done.stderr
    records = read_records(out / "episodes.jsonl")
    assert len(records) == 5 and all(r.status == "agent_error" for r in records)
    # What ran is summarized for reading; the resume runs the rest.
    assert json.loads((out / "summary.json").read_text())["status"] == {"agent_error": 5}
    assert (out / "report.html").exists()


def test_a_run_whose_episodes_all_errored_exits_non_zero(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Act: answer(1)"}, failures=[404] * 50) as srv:
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "2", "--agent", "openai:missing-model",
                   "--base-url", srv.base_url, "--quiet", "--output", str(out), cwd=tmp_path)
    assert done.returncode == 1
    assert "every episode of this run ended in an error (2 of 2)" in done.stderr and "404" in done.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == {"agent_error": 2}


def test_hints_name_real_options(tmp_path: Path) -> None:
    """Every ``--option`` an error message of the agents or the evaluator suggests exists in ``eval --help``."""
    help_text = cli("eval", "--help", cwd=tmp_path).stdout
    sources = [ROOT / "agentunit_gym" / "eval" / name for name in (
        "agents/openai_agent.py", "agents/builtin.py", "evaluate.py", "run/engine.py", "run/slots.py", "plan/work.py")]
    hinted = {m for path in sources for m in re.findall(r"(--[a-z][a-z-]+)", path.read_text())}
    assert hinted, "no hints found"
    assert {h for h in hinted if h not in help_text} == set()
