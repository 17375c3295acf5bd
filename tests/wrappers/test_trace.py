from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.trace import TRACE_SCHEMA_VERSION, AgentReply, EpisodeTrace, Flag, Usage
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import ClassifyActions, RecordTrace, make_eval_env

from ..core.toy import ToyEnv


def test_trace_records_what_happened_and_round_trips(tmp_path: Path) -> None:
    env = RecordTrace(ClassifyActions(ToyEnv()), directory=tmp_path, env_id="toy-v0", metadata={"run": "r1"})
    env.reset(seed=9, options={"task_id": "t1"})
    env.annotate_next_step(tokens_in=100, tokens_out=7, cost=0.002, latency_s=0.5)
    env.step("Act: ansver(1)")
    env.step(AgentReply("Think: ok\nAct: echo(fail)", Usage(tokens_in=120, tokens_out=9, reasoning_tokens=3)))
    env.annotate_next_step(cost=0.01)
    _, _, term, _, info = env.step(AgentReply("Act: answer(42)", Usage(tokens_in=130, cost=0.5, latency_s=1.5)))
    assert term
    trace = info["trace"]
    assert isinstance(trace, EpisodeTrace)
    assert trace.env_id == "toy-v0" and trace.task_id == "t1" and trace.seed == 9 and trace.domain == "toy"
    assert trace.finish_reason is FinishReason.COMPLETE and trace.score is not None and trace.score.success
    assert [s.index for s in trace.steps] == [1, 2, 3]
    assert [s.flags for s in trace.steps] == [
        (Flag.INVALID_ACTION, Flag.HALLUCINATION), (Flag.EXECUTION_ERROR,), ()]
    first, second, third = trace.steps
    assert first.action is None and first.action_error is not None
    assert first.action_error["issue"] == "unknown_tool" and first.action_error["hint"] == "Did you mean 'answer'?"
    assert first.usage == Usage(tokens_in=100, tokens_out=7, cost=0.002, latency_s=0.5)
    assert second.action == {"tool": "echo", "arguments": {"text": "fail"}, "form": "react"}
    assert second.execution == {"length": 4} and second.execution_error
    assert second.usage.tokens_in == 120 and second.usage.reasoning_tokens == 3
    assert second.usage.latency_s is not None and second.usage.latency_s >= 0  # measured: none reported
    assert third.usage.cost == 0.01 and third.usage.tokens_in == 130 and third.usage.latency_s == 1.5
    assert third.reward == 1.0 and all(s.env_latency_s >= 0 for s in trace.steps)
    assert trace.metadata["run"] == "r1" and trace.metadata["invalid_count"] == 1
    # Round trip, in memory and through the file written.
    assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace
    (path,) = env.written
    assert path.parent == tmp_path and path.name.startswith("t1--")
    assert EpisodeTrace.model_validate_json(path.read_text()) == trace
    assert env.last_trace() == trace


TRACE_SCHEMA_V1 = json.loads((Path(__file__).parent / "fixtures" / "trace_schema_v1.json").read_text())
TRACE_SCHEMA_V2 = json.loads((Path(__file__).parent / "fixtures" / "trace_schema_v2.json").read_text())
"""The trace format written down by hand (docs/wrappers.md), not generated from ``EpisodeTrace``:
version 2, the one written, and version 1, which still reads."""


def _written_traces(tmp_path: Path) -> list[dict[str, object]]:
    """Two written traces that fill every part of the format: invalid and failing steps, usage,
    a score; and a DB episode with a trap injected into its prompt."""
    env = RecordTrace(ClassifyActions(ToyEnv()), directory=tmp_path / "toy", env_id="toy-v0", metadata={"run": "r1"})
    env.reset(seed=9, options={"task_id": "t1"})
    env.step("Act: ansver(1)")
    env.step(AgentReply("Think: ok\nAct: echo(fail)", Usage(tokens_in=120, tokens_out=9, reasoning_tokens=3)))
    env.step(AgentReply("Act: answer(42)", Usage(tokens_in=130, cost=0.5, latency_s=1.5, finish_reason="stop")))
    db = make_eval_env("AgentUnit/DB-v0", backend="sqlite", trap_rate=1.0, trap_seed=3, trace_dir=tmp_path / "db")
    try:
        db.reset(seed=0)
        db.step("Action: Operation\n```sql\nDROP TABLE nothing_here\n```")
        db.step("Action: Answer\nFinal Answer: [\"x\"]")
    finally:
        db.close()
    paths = sorted((tmp_path / "toy").glob("*.json")) + sorted((tmp_path / "db").glob("*.json"))
    return [json.loads(path.read_text()) for path in paths]


def test_written_traces_match_the_hand_written_format(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    toy, db = _written_traces(tmp_path)
    for document in (toy, db):
        jsonschema.validate(document, TRACE_SCHEMA_V2)
    # The parts the schema cannot pin, checked as values.
    assert [s["flags"] for s in toy["steps"]] == [["INVALID_ACTION", "HALLUCINATION"], ["EXECUTION_ERROR"], []]
    assert toy["steps"][0]["action_error"]["issue"] == "unknown_tool" and toy["steps"][0]["action"] is None
    assert toy["steps"][2]["usage"]["finish_reason"] == "stop" and toy["finish_reason"] == "complete"
    assert toy["score"] == {"reward": 1.0, "success": True, "components": {"exact_match": True}, "detail": ""}
    assert len(db["traps"]) == 1 and db["traps"][0]["placement"] in ("prompt", "observation")
    assert db["domain"] == "db" and db["backend"] == "sqlite" and db["env_id"] == "AgentUnit/DB-v0"
    assert toy["split"] == "" and db["split"] in ("train", "test")  # the toy's task file names none


def test_a_version_1_trace_still_reads(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    _, db = _written_traces(tmp_path)
    old = {k: v for k, v in db.items() if k != "split"} | {"schema_version": 1}
    jsonschema.validate(old, TRACE_SCHEMA_V1)
    read = EpisodeTrace.model_validate(old)
    assert read.split == "" and read.schema_version == 1 and read.task_id == db["task_id"]


def test_the_model_and_the_hand_written_format_name_the_same_fields() -> None:
    # A field added to or renamed in the model without a new schema_version fails here.
    generated = EpisodeTrace.model_json_schema(mode="serialization")
    assert TRACE_SCHEMA_V2["properties"]["schema_version"] == {"const": TRACE_SCHEMA_VERSION}
    assert set(generated["properties"]) == set(TRACE_SCHEMA_V2["properties"])
    step = generated["$defs"]["StepRecord"]["properties"]
    assert set(step) == set(TRACE_SCHEMA_V2["$defs"]["step"]["properties"])


def test_observation_and_reply_are_capped() -> None:
    env = RecordTrace(ToyEnv(max_steps=1), max_chars=50)
    env.reset(options={"task_id": "t1"})
    long = "x" * 5000
    _, _, _, trunc, info = env.step(f"Act: echo({long})")
    step = info["trace"].steps[0]
    assert trunc and len(step.observation) < 120 and step.observation_chars == 5000
    assert step.observation.endswith("[... 4950 more characters not recorded]")
    assert step.raw_action.startswith("Act: echo(xxx") and len(step.raw_action) < 120
    assert info["trace"].finish_reason is FinishReason.TASK_LIMIT


def test_trace_available_while_running_and_abandoned_episodes_are_kept(tmp_path: Path) -> None:
    env = RecordTrace(ToyEnv(), directory=tmp_path)
    env.reset(options={"task_id": "t1"})
    env.step("Act: echo(a)")
    running = env.current_trace()
    assert running is not None and len(running.steps) == 1 and running.finish_reason is None
    env.reset(options={"task_id": "t2"})  # abandons t1
    assert len(env.written) == 1
    abandoned = EpisodeTrace.model_validate_json(env.written[0].read_text())
    assert abandoned.task_id == "t1" and abandoned.finish_reason is None
    assert abandoned.finish_detail == "abandoned: reset before the episode ended"
    assert env.current_trace().task_id == "t2"  # type: ignore[union-attr]


def test_non_json_values_in_info_still_serialise() -> None:
    env = RecordTrace(ToyEnv())
    env.reset(options={"task_id": "t1"})
    original = env.unwrapped._execute

    def odd(action):  # type: ignore[no-untyped-def]
        execution = original(action)
        execution.details.update({"when": object(), "nan": float("nan"), "reason": FinishReason.ERROR})
        return execution

    env.unwrapped._execute = odd  # type: ignore[method-assign]
    env.step("Act: echo(a)")
    trace = env.current_trace()
    assert trace is not None
    details = trace.steps[0].execution
    assert details["nan"] == "nan" and details["reason"] == "error" and details["when"].startswith("<object")
    assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace


def test_bad_cap() -> None:
    with pytest.raises(ConfigError):
        RecordTrace(ToyEnv(), max_chars=0)


def test_os_timeout_and_truncation_reach_the_trace() -> None:
    from agentunit_gym.wrappers import make_eval_env

    env = make_eval_env("AgentUnit/OS-v0", backend="local", command_timeout=0.5, max_steps=3)
    try:
        env.reset(seed=0, options={"task_id": "os-files-largest"})
        _, _, _, _, info = env.step("Act: bash\n```bash\nsleep 5\n```")
        assert Flag.TIMEOUT in info["flags"] and Flag.EXECUTION_ERROR in info["flags"]
        _, _, _, _, info = env.step("Act: bash\n```bash\nseq 1 5000\n```")
        assert Flag.TRUNCATED in info["flags"] and Flag.TIMEOUT not in info["flags"]
        _, _, _, trunc, info = env.step("Act: answer(archive.dat)")
        trace = info["trace"]
        assert [s.flags for s in trace.steps] == [
            (Flag.EXECUTION_ERROR, Flag.TIMEOUT), (Flag.TRUNCATED,), ()]
        assert trace.steps[0].execution["timed_out"] is True and trace.steps[1].observation_chars > 800
        assert trace.finish_reason is FinishReason.COMPLETE and trace.score is not None and trace.score.success
    finally:
        env.close()
