"""AgentUnit suites through inspect_ai's own machinery: ``inspect_ai.eval`` of the ``agentunit``
task, its ReAct agent stepping the env through inspect tools, and the env's score as inspect's.

The model is inspect's ``mockllm/model`` with scripted outputs (no network): it plays the oracle's
tool calls, or a wrong answer, and the scores must be those ``agentunit-gym eval`` gives the same
seeded episodes. Every scripted output carries its token usage, so mockllm never counts tokens
(tiktoken's encoding would be downloaded).

Skipped where inspect_ai is not installed (the ``inspect`` extra); with ``CI=true`` a failure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"

try:
    import inspect_ai  # noqa: F401
except ImportError:
    if IN_CI:
        pytest.fail('inspect_ai is not installed: CI installs the test extra, which brings it (pip install '
                    '"agentunit-gym[inspect]")', pytrace=False)
    pytest.skip('inspect_ai is not installed (pip install "agentunit-gym[inspect]"; CI=true makes this a failure)',
                allow_module_level=True)

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import EvalLog  # noqa: E402
from inspect_ai.model import ChatMessage, ChatMessageUser, GenerateConfig, ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.tool import ToolChoice, ToolInfo  # noqa: E402

import agentunit_gym  # noqa: E402,F401
from agentunit_gym.eval.evaluate import evaluate  # noqa: E402
from agentunit_gym.eval.plan.config import EvalConfig  # noqa: E402
from agentunit_gym.eval.record.records import read_records  # noqa: E402
from agentunit_gym.integrations.inspect import METADATA_KEY, agentunit, resolve_suite  # noqa: E402

pytestmark = pytest.mark.slow

ENV, BACKEND, N, SEED = "DB-v0", "sqlite", 3, 7
USAGE = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)

Script = Callable[[list[ChatMessage], list[ToolInfo], ToolChoice, GenerateConfig], ModelOutput]


def _reference_calls(task_ids: list[str]) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """Each task's instruction and its reference solution as JSON tool calls (the oracle's replies)."""
    env = gym.make(f"AgentUnit/{ENV}", backend=BACKEND, action_format="tools")
    try:
        base: Any = env.unwrapped
        found = {}
        for task in base.tasks:
            if task.id in task_ids:
                assert not any(s.from_output for s in task.reference_solution), task.id
                steps = [json.loads(base.render_action(s)) for s in task.reference_solution]
                found[task.id] = (task.instruction, steps)
        return found
    finally:
        env.close()


def _scripted(calls: dict[str, tuple[str, list[dict[str, Any]]]], wrong: bool = False) -> Script:
    """mockllm outputs: for the task in the conversation, its next reference call (by the number of
    assistant turns since the task's message). ``wrong``: commit an empty answer at once."""

    def output(messages: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice,
               config: GenerateConfig) -> ModelOutput:
        for instruction, steps in calls.values():
            start = next((i for i, m in enumerate(messages)
                          if isinstance(m, ChatMessageUser) and instruction in m.text), None)
            if start is None:
                continue
            turn = sum(1 for m in messages[start:] if m.role == "assistant")
            if wrong:
                commit = steps[-1]
                step = {"name": commit["name"], "arguments": {k: ["no such value"] if isinstance(v, list) else
                                                               "no such value" for k, v in commit["arguments"].items()}}
            else:
                step = steps[min(turn, len(steps) - 1)]
            made = ModelOutput.for_tool_call("mockllm/model", step["name"], step["arguments"])
            made.usage = USAGE
            return made
        raise AssertionError(f"no task of {sorted(calls)} in the conversation")

    return output


def _run(tmp_path: Path, script: Script, **task_args: Any) -> EvalLog:
    model = get_model("mockllm/model", custom_outputs=script)
    (log,) = inspect_eval(agentunit(env=ENV, backend=BACKEND, n=N, seed=SEED, **task_args), model=model,
                          log_dir=str(tmp_path / "inspect-logs"), display="none", max_samples=2)
    assert log.status == "success", log.error
    assert log.samples is not None
    return log


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same seeded episodes under ``agentunit-gym eval``'s oracle: ``{task_id: record}``."""
    out = tmp_path_factory.mktemp("eval") / "run"
    result = evaluate(EvalConfig(envs=(ENV,), backends=(BACKEND,), agent="oracle", n=N, seed=SEED), output=out)
    return {r.task_id: r for r in read_records(result.run_dir / "episodes.jsonl")}


def test_the_suite_is_the_evaluators_seeded_sample(oracle_run: dict[str, Any]) -> None:
    suite = resolve_suite(ENV, backend=BACKEND, n=N, seed=SEED)
    assert suite.env_id == f"AgentUnit/{ENV}" and suite.options["action_format"] == "tools"
    assert {i.task_id: i.seed for i in suite.items} == {t: r.seed for t, r in oracle_run.items()}


def test_a_suite_is_a_split_a_generated_set_or_a_task_file_and_names_what_is_wrong(tmp_path: Path) -> None:
    from agentunit_gym.errors import ConfigError, TaskFileError

    test_split = resolve_suite(ENV, backend=BACKEND, split="test")
    assert test_split.items and all(i.task_id in test_split.instructions for i in test_split.items)
    generated = resolve_suite(ENV, backend=BACKEND, tasks="generated:DB-v0:train:4:0")
    assert len(generated.items) == 4 and all(i.task_id.startswith("gen-db-") for i in generated.items)
    with pytest.raises(ConfigError, match="holds kg tasks"):
        resolve_suite(ENV, tasks="generated:KG-v0:train:4:0")
    with pytest.raises(TaskFileError, match="no such file"):
        resolve_suite(ENV, tasks=str(tmp_path / "missing.json"))


def test_inspect_eval_plays_the_oracle_and_scores_as_agentunit_eval(tmp_path: Path,
                                                                    oracle_run: dict[str, Any]) -> None:
    calls = _reference_calls(list(oracle_run))
    log = _run(tmp_path, _scripted(calls))
    assert log.samples is not None and {s.id for s in log.samples} == set(oracle_run)
    for sample in log.samples:
        record = oracle_run[str(sample.id)]
        (score,) = sample.scores.values() if sample.scores else ()
        result = sample.metadata[METADATA_KEY]
        # The same episode, the same score: reward and success as under agentunit-gym eval's oracle.
        assert score.value == record.reward == 1.0
        assert score.metadata is not None and score.metadata["success"] is record.success is True
        assert result["finish_reason"] == record.finish_reason == "complete"
        assert result["steps"] == record.steps == len(calls[str(sample.id)][1])
        assert score.metadata["components"]["success"] is True
        # Each env step was an inspect tool call, answered by the env's observation.
        tool_messages = [m for m in sample.messages if m.role == "tool"]
        assert [m.function for m in tool_messages][-1] == calls[str(sample.id)][1][-1]["name"]
        assert tool_messages[-1].text == "Episode finished."
        assert all(m.function for m in tool_messages)  # the worked example's results name their tool too
        assert sample.messages[0].role == "system" and "one tool call per turn" in sample.messages[0].text
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    assert metrics["mean"].value == 1.0 and metrics["success_rate"].value == 1.0


def test_a_wrong_answer_scores_0_with_the_score_components(tmp_path: Path, oracle_run: dict[str, Any]) -> None:
    calls = _reference_calls(list(oracle_run))
    log = _run(tmp_path, _scripted(calls, wrong=True))
    assert log.samples is not None
    for sample in log.samples:
        (score,) = sample.scores.values() if sample.scores else ()
        assert score.value == 0.0 and score.metadata is not None and score.metadata["success"] is False
        assert score.metadata["finish_reason"] == "complete" and score.metadata["steps"] == 1
        assert score.metadata["components"]["success"] is False
    assert log.results is not None and log.results.scores[0].metrics["success_rate"].value == 0.0


def test_replies_without_tool_calls_are_env_turns_until_its_step_limit(tmp_path: Path) -> None:
    def chatter(messages: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice,
                config: GenerateConfig) -> ModelOutput:
        made = ModelOutput.from_content("mockllm/model", "I would rather talk about the weather.")
        made.usage = USAGE
        return made

    log = _run(tmp_path, chatter, task_ids="db-weather-03", examples=False)
    assert log.samples is not None
    (sample,) = log.samples
    result = sample.metadata[METADATA_KEY]
    assert result["finish_reason"] == "task_limit" and result["reward"] == 0.0
    assert result["steps"] == 15  # DB's turn limit: each reply was a turn, answered by the env
    feedback = [m.text for m in sample.messages if m.role == "user"][1:]
    assert feedback and all("No executable tool calls found" in text for text in feedback)
    # examples=False: the system message, the task, then the episode's turns.
    assert [m.role for m in sample.messages[:3]] == ["system", "user", "assistant"]


def test_an_inspect_message_limit_ends_the_episode_as_a_task_limit(tmp_path: Path) -> None:
    calls = _reference_calls(["db-weather-03"])

    def lookup_only(messages: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice,
                    config: GenerateConfig) -> ModelOutput:
        first = calls["db-weather-03"][1][0]
        made = ModelOutput.for_tool_call("mockllm/model", first["name"], first["arguments"])
        made.usage = USAGE
        return made

    model = get_model("mockllm/model", custom_outputs=lookup_only)
    (log,) = inspect_eval(agentunit(env=ENV, backend=BACKEND, task_ids="db-weather-03", examples=False),
                          model=model, log_dir=str(tmp_path / "logs"), display="none", message_limit=6)
    assert log.samples is not None
    (sample,) = log.samples
    result = sample.metadata[METADATA_KEY]
    assert result["finish_reason"] == "task_limit" and "message limit" in result["finish_detail"]
    assert 0 < result["steps"] < 15 and result["reward"] == 0.0
    (score,) = sample.scores.values() if sample.scores else ()
    assert score.value == 0.0


ENTRY_POINT_RUN = """
from inspect_ai import eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

def answer(messages, tools, choice, config):
    made = ModelOutput.for_tool_call("mockllm/model", "submit_answer", {"answer": ["no such value"]})
    made.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return made

(log,) = eval("agentunit_gym/agentunit", task_args={"env": "DB-v0", "backend": "sqlite", "task_ids": "db-weather-03"},
              model=get_model("mockllm/model", custom_outputs=answer), log_dir="logs", display="none")
(sample,) = log.samples
(score,) = sample.scores.values()
print(log.status, sample.id, score.value, score.metadata["finish_reason"], score.metadata["steps"])
"""


def test_inspect_finds_the_task_by_its_registry_name_through_the_entry_point(tmp_path: Path) -> None:
    """``inspect eval agentunit_gym/agentunit`` resolves the name through the package's ``inspect_ai``
    entry point (run in a fresh process, outside the checkout, as a user would)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ENTRY_POINT_RUN], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["success", "db-weather-03", "0.0", "complete", "1"]


class FailOnSecondStep(gym.Wrapper[str, str, str, str]):
    """The backend times out on the episode's second step, as a dead container would."""

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: str) -> Any:
        self.steps += 1
        if self.steps == 2:
            from agentunit_gym.errors import BackendTimeoutError

            raise BackendTimeoutError("the backend did not answer within 30 s")
        return self.env.step(action)


def test_a_backend_failure_fails_the_sample_and_is_never_a_score(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.integrations.suite import Suite

    make_env = Suite.make_env
    monkeypatch.setattr(Suite, "make_env", lambda suite: FailOnSecondStep(make_env(suite)))
    calls = _reference_calls(["db-weather-03"])
    model = get_model("mockllm/model", custom_outputs=_scripted(calls))
    (log,) = inspect_eval(agentunit(env=ENV, backend=BACKEND, task_ids="db-weather-03", examples=False),
                          model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.samples is not None
    (sample,) = log.samples
    # A TimeoutError raised by a tool is one inspect would hand the model as "timed out": here it fails the sample.
    assert sample.error is not None and "BackendTimeoutError" in sample.error.message
    assert not sample.scores
    assert log.status == "error"
