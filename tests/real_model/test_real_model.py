"""A real small model end to end (issue 25 point 8): SmolLM2-135M-Instruct on llama-cpp-python,
every domain on its embedded backend, under the default protocol and ``agentbench-fc``, then
``judge``. A 135M model solves next to nothing; what is checked is the harness around it:
every episode ends classified, none is an endpoint error while the server is up, the prompt
the model receives (captured by the recording proxy) says each thing once and matches the
backend, and the trace records why the model stopped (``finish_reason``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.eval.record.records import EpisodeRecord, iter_records
from tests.cli.clitools import cli
from tests.real_model.conftest import FC_MODEL, MODEL, RealModel

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(3000)]

ENVS = ("--env", "OS-v0", "--env", "DB-v0", "--env", "KG-v0", "--env", "WebShop-v0",
        "--backend", "local", "--backend", "sqlite")
SETTINGS = ("-n", "1", "--max-tokens", "64", "--max-steps", "3", "--seed", "0",
            "--request-timeout", "1200", "--turn-deadline", "3600", "--full-text", "--quiet")
"""One task per domain, at most 3 turns of at most 64 tokens: the harness is under test, not the
model, and a 2-core CI machine serves ~10-30 tokens a second (far fewer under load). The
request timeout is long because the server answers one request at a time: a request waits
behind the others in flight, and a timeout would only queue it again (docs/agents.md)."""
DOMAINS = {"os", "db", "kg", "webshop"}
TEXT_GRAMMAR_MARKERS = ("Act:", "Action:", "Thought:", "Final Answer:", "```sql", "search[", "click[")
MODEL_STOP_REASONS = {"stop", "length", "tool_calls"}


@dataclass
class Run:
    out: Path
    returncode: int
    stderr: str
    requests: list[dict[str, Any]]
    statuses: list[int]
    units: list[tuple[EpisodeRecord, EpisodeTrace | None]]


def _eval(real_model: RealModel, out: Path, model: str, *extra: str) -> Run:
    start = len(real_model.proxy.exchanges)
    done = cli("eval", *ENVS, *SETTINGS, "--agent", f"openai:{model}", "--base-url", real_model.base_url,
               "--output", str(out), *extra, cwd=out.parent, timeout=2400)
    exchanges = [e for e in real_model.proxy.exchanges[start:] if str(e["path"]).endswith("/completions")]
    units = list(iter_records(out)) if (out / "episodes.jsonl").exists() else []
    return Run(out, done.returncode, done.stderr, [e["request"] for e in exchanges], [e["status"] for e in exchanges],
               units)


@pytest.fixture(scope="module")
def default_run(real_model: RealModel, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _eval(real_model, tmp_path_factory.mktemp("real") / "default", MODEL)


@pytest.fixture(scope="module")
def fc_run(real_model: RealModel, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _eval(real_model, tmp_path_factory.mktemp("real") / "fc", FC_MODEL, "--protocol", "agentbench-fc")


def _first_request(run: Run, trace: EpisodeTrace) -> dict[str, Any]:
    """The request that opened the episode: its last message is the env's first observation."""
    for body in run.requests:
        last = body["messages"][-1]
        if last["role"] == "user" and last.get("content") == trace.prompt:
            return body
    raise AssertionError(f"no request carried the first observation of {trace.task_id}")


def _grammar(trace: EpisodeTrace) -> str:
    env = gym.make(trace.env_id or "", backend=trace.backend)
    try:
        return str(env.reset(seed=0)[1]["grammar"])
    finally:
        env.close()


def _sentences(messages: list[dict[str, Any]]) -> list[str]:
    said = [m for m in messages if m["role"] == "system"] + [messages[-1]]
    return [s.strip() for m in said for s in str(m.get("content") or "").replace("\n", " ").split(". ")
            if len(s.strip()) > 30]


@pytest.mark.parametrize("run_name", ["default_run", "fc_run"])
def test_every_episode_ends_classified_and_none_is_an_endpoint_error(run_name: str,
                                                                    request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(run_name)
    assert run.returncode == 0, run.stderr[-2000:]
    assert {t.domain for _, t in run.units if t is not None} == DOMAINS
    classified = {f.value for f in FinishReason}
    for record, trace in run.units:
        assert record.status == "done", (record.key, record.status, record.error)  # no endpoint_error, no crash
        assert record.finish_reason in classified, (record.key, record.finish_reason)
        # A first request already past the model's context ends the episode as CLE before a step.
        assert trace is not None and (trace.steps or record.finish_reason == "context_limit"), record.key
    # The server answered every request (a context overflow would be a 400, classified as CLE).
    assert run.statuses and set(run.statuses) <= {200, 400}, sorted(set(run.statuses))


@pytest.mark.parametrize("run_name", ["default_run", "fc_run"])
def test_the_trace_records_why_the_model_stopped(run_name: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(run_name)
    reasons = [step.usage.finish_reason for _, t in run.units if t is not None for step in t.steps]
    assert reasons and set(reasons) <= MODEL_STOP_REASONS, set(reasons)
    assert all((step.usage.tokens_in or 0) > 0 for _, t in run.units if t is not None for step in t.steps)
    # A reply cut at --max-tokens is told apart from a format the model chose (truncated_reply).
    for _, trace in run.units:
        for step in trace.steps if trace is not None else ():
            if step.action_error and step.usage.finish_reason == "length":
                assert step.action_error.get("truncated_reply") is True


def test_the_prompt_says_each_thing_once_and_matches_the_backend(default_run: Run) -> None:
    for _, trace in default_run.units:
        assert trace is not None
        body = _first_request(default_run, trace)
        messages = body["messages"]
        text = "\n".join(str(m.get("content") or "") for m in messages)
        sentences = _sentences(messages)
        assert len(sentences) == len(set(sentences)), [s for s in sentences if sentences.count(s) > 1]
        assert "tools" not in body  # the default protocol is text (ReAct)
        grammar = _grammar(trace)
        assert text.count(grammar) == 1, (trace.domain, text.count(grammar))  # once, in the first observation
        assert grammar in str(messages[-1]["content"])
        if trace.domain == "db":
            assert trace.backend == "sqlite" and "SQLite" in text and "MySQL" not in text
        if trace.domain == "os":
            assert trace.backend == "local"


def test_function_calling_sends_tools_and_no_text_grammar(fc_run: Run) -> None:
    for _, trace in fc_run.units:
        assert trace is not None
        body = _first_request(fc_run, trace)
        assert body.get("tools"), trace.domain
        shown = [m for m in body["messages"] if m["role"] in ("system", "user")]
        taught = [marker for m in shown for marker in TEXT_GRAMMAR_MARKERS if marker in str(m.get("content") or "")]
        assert taught == [], (trace.domain, taught)
        for step in trace.steps:
            calls = (step.message or {}).get("tool_calls")
            if not calls:  # prose is never run: AgentBench FC's answer, and the episode went on
                assert step.action is None and step.action_error and step.action_error["issue"] == "no_call"
                assert step.observation.startswith("Invalid format: No executable tool calls found.")


def test_the_judge_asks_for_json_by_schema_and_counts_every_call(real_model: RealModel, default_run: Run) -> None:
    start = len(real_model.proxy.exchanges)
    done = cli("judge", str(default_run.out), "--judge", f"openai:{MODEL}", "--base-url", real_model.base_url,
               "--criteria", "bundled", "--judge-repeats", "1", "--max-tokens", "200", "--request-timeout", "1200",
               "--turn-deadline", "3600", "--quiet",
               cwd=default_run.out.parent, timeout=2400)
    assert done.returncode in (0, 4), done.stderr[-2000:]
    calls = [e for e in real_model.proxy.exchanges[start:] if str(e["path"]).endswith("/completions")]
    # llama-cpp-python's server refuses OpenAI's json_schema form (a 500 reporting a request
    # validation error, not retried) and takes its own
    # json_object form with the schema, which it decodes under a grammar.
    refused = [e for e in calls if e["status"] != 200]
    answered = [e for e in calls if e["status"] == 200]
    assert refused and all(e["status"] == 500 for e in refused)  # concurrent first calls may each be refused
    assert all(e["request"]["response_format"]["type"] == "json_schema" for e in refused)
    assert answered and all(e["request"]["response_format"]["type"] == "json_object" for e in answered)
    criteria = json.loads((default_run.out / "judge" / "criteria.json").read_text())
    assert criteria["reply_format"] == "json_object"
    total = sum(e["response"]["usage"]["prompt_tokens"] for e in answered)
    assert criteria["usage"]["tokens_in"] == total  # every call counted, garbage included
    lines = [json.loads(x) for x in (default_run.out / "judge" / "judged.jsonl").read_text().splitlines()]
    assert len(lines) == len(default_run.units)
    assert all(line["usage"]["tokens_in"] for line in lines)
    if done.returncode == 4:
        assert "nothing could be judged" in done.stderr
    else:
        assert any(line["status"] == "judged" for line in lines)
