"""What a model receives: the messages of the first request the OpenAI agent sends, captured by
the fake server, for every registered domain on each of its embedded backends (issue 25: a small
model copied the indented grammar, its placeholders and a second, contradicting dialect)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.core import registry
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.openai_agent import OpenAIChatAgent, OpenAIConfig
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.report.metrics import echoes_example
from agentunit_gym.eval.run.runner import EvalConfig

CASES = [(registry.get_domain(name).envs[0].id, spec.name)
         for name in registry.domain_names() for spec in registry.get_domain(name).backends if spec.embedded]

SQL_DIALECTS = {"sqlite": "SQLite", "mysql": "MySQL"}


def first_request(env_id: str, backend: str, mode: str = "react") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    env = gym.make(env_id, backend=backend)
    try:
        observation, info = env.reset(seed=0)
        with FakeChatServer(lambda body: {"role": "assistant", "content": "Think: stop."}) as server:
            agent = OpenAIChatAgent(OpenAIConfig(model="fake", base_url=server.base_url, mode=mode))  # type: ignore[arg-type]
            agent.reset(info)
            asyncio.run(agent.act(observation, info))
        return list(server.requests[0]["messages"]), info
    finally:
        env.close()


def test_every_registered_domain_is_covered() -> None:
    assert {env_id for env_id, _ in CASES} == {registry.get_domain(n).envs[0].id for n in registry.domain_names()}


@pytest.mark.parametrize(("env_id", "backend"), CASES)
def test_the_grammar_is_said_once_flush_left(env_id: str, backend: str) -> None:
    messages, info = first_request(env_id, backend)
    grammar = str(info["grammar"])
    text = "\n".join(str(m.get("content") or "") for m in messages)
    assert grammar and text.count(grammar) == 1, f"the grammar appears {text.count(grammar)} times"
    assert grammar in str(messages[-1]["content"])  # with the task, after the worked example
    # No grammar line is repeated with an indentation a model would copy.
    lines = {line.strip() for line in grammar.splitlines() if len(line.strip()) > 3}
    indented = [line for m in messages for line in str(m.get("content") or "").splitlines()
                if line != line.lstrip() and line.strip() in lines]
    assert not indented, indented
    assert all(line == line.lstrip() for line in grammar.splitlines())
    # Nothing said twice: no sentence of the system message or of the task's observation repeats.
    said = [sentence.strip() for m in messages if m["role"] == "system" or m is messages[-1]
            for sentence in str(m.get("content") or "").replace("\n", " ").split(". ") if len(sentence.strip()) > 30]
    assert len(said) == len(set(said)), [s for s in said if said.count(s) > 1]
    # Placeholders that cannot pass for an answer: no angle-bracket slots, no sample values.
    for leaked in ("<commands>", "<your answer>", '"value1"', "<one SQL statement>"):
        assert leaked not in text


@pytest.mark.parametrize(("env_id", "backend"), [c for c in CASES if c[0].endswith("DB-v0")])
def test_the_sql_dialect_is_the_backends(env_id: str, backend: str) -> None:
    messages, _ = first_request(env_id, backend)
    text = "\n".join(str(m.get("content") or "") for m in messages)
    assert SQL_DIALECTS[backend] in text
    for other, name in SQL_DIALECTS.items():
        if other != backend:
            assert name not in text, f"{name} named on the {backend} backend"


@pytest.mark.parametrize(("env_id", "backend"), CASES)
def test_tools_mode_sends_no_text_grammar_in_the_system_message(env_id: str, backend: str) -> None:
    messages, info = first_request(env_id, backend, mode="tools")
    assert str(info["grammar"]) not in str(messages[0]["content"])


def test_a_reply_copied_from_the_worked_example_is_counted(tmp_path: Path) -> None:
    example = registry.get_domain("db").prompt.example[-1].react  # "... Final Answer: ["4"]"
    with FakeChatServer(lambda body: {"role": "assistant", "content": example}) as server:
        config = EvalConfig(envs=("DB-v0",), backends=("sqlite",), agent="openai:fake-model", n=2, concurrency=1)
        result = evaluate(config, tmp_path, base_url=server.base_url)
    metrics = result.summary["overall"]["metrics"]
    # The echo commits (finish reason Complete), so only this metric tells it from an answer.
    assert metrics["example_echo_rate"]["value"] == 1.0
    assert metrics["finish_complete_rate"]["value"] == 1.0
    assert not echoes_example("db", "Think: I look at the table first.\nAction: Answer\nFinal Answer: [\"4\"]")
