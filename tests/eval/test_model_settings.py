"""A real model's settings and its stop reasons: sampling and timing options from the CLI to the
request, config.json and the report; a reply cut at ``max_tokens`` told apart from a format error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentunit_gym.cli.eval_cmd import build_config
from agentunit_gym.cli.main import build_parser
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import OpenAIConfig, parse_model_args
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.run.runner import EvalConfig, RunPaths, load_trace, read_records
from tests.cli.clitools import cli

CUT = "Think: I will first look at every table, then at each column of the first table, and then"


def test_a_reply_cut_at_the_token_limit_is_a_truncated_reply_not_a_chosen_format(tmp_path: Path) -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": CUT, "finish_reason": "length"}) as server:
        config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", n=1, concurrency=1,
                            invalid_action="terminate")
        result = evaluate(config, tmp_path, base_url=server.base_url)
    (record,) = read_records(RunPaths(tmp_path).episodes)
    trace = load_trace(tmp_path, record)
    assert trace is not None and trace.finish_reason is FinishReason.INVALID_FORMAT
    (step,) = trace.steps
    assert step.usage.finish_reason == "length"  # recorded per step
    assert step.action_error is not None and step.action_error["truncated_reply"] is True
    assert "token limit" in step.action_error["hint"]
    assert "truncated_reply" in trace.finish_detail
    metrics = result.summary["overall"]["metrics"]
    assert metrics["truncated_reply_rate"]["value"] == 1.0
    assert metrics["invalid_format_step_rate"]["value"] == 0.0  # IF the model chose: none


def test_a_reply_that_stopped_normally_keeps_its_reason_and_is_a_plain_format_error(tmp_path: Path) -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "no action here"}) as server:
        config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", n=1, concurrency=1,
                            invalid_action="terminate")
        result = evaluate(config, tmp_path, base_url=server.base_url)
    (record,) = read_records(RunPaths(tmp_path).episodes)
    trace = load_trace(tmp_path, record)
    assert trace is not None
    (step,) = trace.steps
    assert step.usage.finish_reason == "stop" and step.action_error is not None
    assert step.action_error["truncated_reply"] is False
    metrics = result.summary["overall"]["metrics"]
    assert metrics["truncated_reply_rate"]["value"] == 0.0
    assert metrics["invalid_format_step_rate"]["value"] == 1.0


def test_model_args_are_json_when_they_parse() -> None:
    assert parse_model_args(["seed=7", "repeat_penalty=1.1", 'stop=["\\n"]', "grammar=root ::= x", "a=b=c"]) == {
        "seed": 7, "repeat_penalty": 1.1, "stop": ["\n"], "grammar": "root ::= x", "a": "b=c"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_model_args(["seed"])
    with pytest.raises(ConfigError, match="--max-tokens"):
        OpenAIConfig(model="m", extra_body={"max_tokens": 9})


def test_model_settings_reach_the_request_config_json_the_report_and_a_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    options = ["--temperature", "0.7", "--top-p", "0.9", "--max-tokens", "64", "--request-timeout", "30",
               "--turn-deadline", "90", "--model-arg", "seed=7", "--model-arg", "repeat_penalty=1.1"]
    with FakeChatServer(lambda body: {"role": "assistant", "content": "Action: Answer\nFinal Answer: []"}) as server:
        done = cli("eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", "openai:m",
                   "--base-url", server.base_url, "--output", str(out), "--quiet", *options, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    body = server.requests[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"], body["repeat_penalty"]) == (
        0.7, 0.9, 64, 7, 1.1)
    settings = json.loads((out / "config.json").read_text())["agent_settings"]
    assert settings == {**settings, "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "request_timeout_s": 30.0,
                        "turn_deadline_s": 90.0, "extra_body": {"seed": 7, "repeat_penalty": 1.1}}
    report = (out / "report.html").read_text()
    assert "temperature 0.7" in report and "max_tokens 64" in report and "seed=7" in report
    # --resume without the options keeps them; an option given again replaces its stored value.
    resumed, _ = build_config(build_parser().parse_args(["eval", "--resume", "--output", str(out)]))
    assert resumed.agent_settings["temperature"] == 0.7 and resumed.agent_settings["extra_body"]["seed"] == 7
    changed, _ = build_config(build_parser().parse_args(
        ["eval", "--resume", "--output", str(out), "--temperature", "0.2"]))
    assert changed.agent_settings["temperature"] == 0.2 and changed.agent_settings["max_tokens"] == 64


def test_judge_takes_the_same_settings() -> None:
    from agentunit_gym.cli.judge_cmd import judge_config

    args = build_parser().parse_args(["judge", "RUN", "--judge", "openai:j", "--base-url", "http://127.0.0.1:9/v1",
                                      "--temperature", "0.3", "--request-timeout", "45", "--model-arg", "seed=1"])
    model = judge_config(args).model
    assert (model.temperature, model.request_timeout_s, model.extra_body, model.max_tokens) == (
        0.3, 45.0, {"seed": 1}, 1024)
    args = build_parser().parse_args(["eval", "--judge", "openai:j", "--judge-max-tokens", "200",
                                      "--max-tokens", "50"])
    assert judge_config(args).model.max_tokens == 200
