"""A model endpoint that goes away mid-run is not the agent's failure: the episode it cut short
is ``endpoint_error`` (left out of success_rate), the run probes the endpoint, stops with
EndpointDownError when it stays down, and ``--resume`` runs those episodes again."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentunit_gym.cli.eval_cmd import print_summary
from agentunit_gym.errors import EndpointDownError, EndpointError
from agentunit_gym.eval.agents.fake_server import FakeChatServer, reference_responder
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.report.summary import load_episodes
from agentunit_gym.eval.run import slots
from agentunit_gym.eval.run.runner import EvalConfig, RunPaths, read_records
from tests.eval.test_openai_e2e import solutions

AGENT = {"max_retries": 1, "backoff_s": 0.01, "request_timeout_s": 5.0, "turn_deadline_s": 10.0}


@pytest.fixture
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots, "ENDPOINT_PROBE_DELAYS_S", (0.05, 0.1))
    monkeypatch.setattr(slots, "ENDPOINT_PROBE_DEADLINE_S", 1.0)


def test_a_server_killed_mid_run_stops_the_run_and_resume_reruns_its_episodes(tmp_path: Path,
                                                                              quick_probes: None) -> None:
    table = solutions("AgentUnit/DB-v0", "sqlite")
    config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", n=6, concurrency=1, seed=3)
    play = reference_responder(table)
    holder: dict[str, FakeChatServer] = {}
    answered = {"n": 0}

    def respond_then_die(body: dict[str, Any]) -> dict[str, Any]:
        answered["n"] += 1
        if answered["n"] == 3:  # the model server goes away after its third answer
            threading.Thread(target=holder["server"].close, daemon=True).start()
        return play(body)

    server = FakeChatServer(respond_then_die)
    holder["server"] = server
    with server, pytest.raises(EndpointDownError, match="went away") as stopped:
        evaluate(config, tmp_path, base_url=server.base_url, agent_options=AGENT)
    assert "--resume" in str(stopped.value) and "endpoint_error" in str(stopped.value)
    records = read_records(RunPaths(tmp_path).episodes)
    lost = [r for r in records if r.status == "endpoint_error"]
    assert len(lost) == 1 and len(records) < 6  # stopped instead of burning through the remaining episodes
    assert "EndpointUnavailableError" in lost[0].error
    assert all(r.status == "done" for r in records if r not in lost)
    _, episodes = load_episodes(tmp_path)
    assert {e.trace.task_id for e in episodes} == {r.task_id for r in records if r.status == "done"}
    summary = json.loads(RunPaths(tmp_path).summary.read_text())
    assert summary["status"]["endpoint_error"] == 1
    assert summary["overall"]["metrics"]["success_rate"]["n"] == len(records) - 1  # the lost one is not a failure
    assert "1 endpoint_error" in RunPaths(tmp_path).report.read_text()
    console = Console(record=True, width=200)
    print_summary(console, summary)
    shown = console.export_text()
    assert "episodes by status: done " in shown and "endpoint_error 1" in shown

    with FakeChatServer(reference_responder(table)) as again:
        evaluate(config, tmp_path, base_url=again.base_url, agent_options=AGENT, resume=True)
    final = {r.key: r for r in read_records(RunPaths(tmp_path).episodes)}
    assert len(final) == 6 and all(r.status == "done" and r.success for r in final.values())


def test_an_endpoint_that_comes_back_lets_the_run_go_on(tmp_path: Path, quick_probes: None) -> None:
    table = solutions("AgentUnit/DB-v0", "sqlite")
    config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", n=3, concurrency=1, seed=3)
    # Two 503s spend the first turn's retries (max_retries=1); the probe then finds the server up.
    with FakeChatServer(reference_responder(table), failures=[503, 503]) as server:
        result = evaluate(config, tmp_path, base_url=server.base_url, agent_options=AGENT)
    statuses = sorted(r.status for r in result.outcome.records)
    assert statuses == ["done", "done", "endpoint_error"]
    assert result.summary["overall"]["metrics"]["success_rate"]["value"] == 1.0


def test_probes_back_off_within_the_deadline() -> None:
    calls: list[float] = []

    def down(timeout: float) -> None:
        calls.append(timeout)
        raise EndpointError("refused")

    assert slots.probe_endpoint(down, (0.01, 0.02, 5.0), 0.5) == "refused"
    assert len(calls) == 3  # at once, then after 0.01 and 0.02 s; the 5 s pause passes the deadline
    ok: list[float] = []
    assert slots.probe_endpoint(ok.append, (0.01,), 1.0) is None and len(ok) == 1


def test_the_cli_exits_3_with_the_resume_command(tmp_path: Path, quick_probes: None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from agentunit_gym.cli.main import main

    table = solutions("AgentUnit/DB-v0", "sqlite")
    play = reference_responder(table)
    holder: dict[str, FakeChatServer] = {}
    answered = {"n": 0}

    def respond_then_die(body: dict[str, Any]) -> dict[str, Any]:
        answered["n"] += 1
        if answered["n"] == 2:
            threading.Thread(target=holder["server"].close, daemon=True).start()
        return play(body)

    server = holder["server"] = FakeChatServer(respond_then_die)
    out = tmp_path / "run"
    with server:
        code = main(["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "5", "--concurrency", "1",
                     "--agent", "openai:fake-model", "--base-url", server.base_url, "--output", str(out), "--quiet",
                     "--turn-deadline", "10", "--request-timeout", "5"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "went away" in err and f"agentunit-gym eval --resume --output {out}" in err
