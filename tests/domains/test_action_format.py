"""``gym.make(env_id, action_format="tools")`` on every registered domain, the out-of-tree example
included: tool calls only, no text grammar in anything the agent is sent.

Like test_conformance.py, nothing here names a domain: the text grammar's markers are read
from the domain's own worked example (its ReAct replies) and the env's text-mode grammar.
The checks:

- ``check_env`` passes with the option, and the first observation states the task and the
  tool schemas (``info["tools"]``) but no grammar;
- a reply without a tool call is answered and classified exactly as the evaluator's
  ``--protocol agentbench-fc`` stack answers it, and never ends the episode;
- the oracle solves a sample of tasks with its steps rendered as tool calls;
- a tools-style :class:`~agentunit_gym.wrappers.chat.ChatMessages` episode (system message,
  worked example, task, feedback, observations) holds no marker of the text grammar, and every
  message renders through a tool-aware chat template (tests/fixtures/chat_templates) with its
  tool calls and tool results in the text.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import jinja2.sandbox
import pytest
from gymnasium.utils.env_checker import check_env

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.core import FinishReason
from agentunit_gym.core.env import NO_TOOL_CALL_HINT, NO_TOOL_CALL_MESSAGE, AgentEnv
from agentunit_gym.core.reference import OutputReply
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import default_env_factory
from agentunit_gym.eval.run.runner import env_options
from agentunit_gym.wrappers import ChatMessages
from tests.domains.conformkit import PROSE, UNKNOWN_TOOL, DomainCase, oracle_sample, probe_task, run_reference

pytestmark = pytest.mark.timeout(600)

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "hermes_tools.jinja"
NO_CALL_FEEDBACK = f"Invalid format: {NO_TOOL_CALL_MESSAGE} {NO_TOOL_CALL_HINT}"

_LABEL = re.compile(r"^\s*([A-Z][A-Za-z ]{0,20}:)", re.MULTILINE)  # Think:, Act:, Action:, Final Answer:
_FENCE = re.compile(r"```[a-z]+")  # ```bash, ```sql
_BRACKET = re.compile(r"\b([a-z_]+\[)")  # search[, click[


def text_grammar_markers(domain_case: DomainCase, grammar: str) -> set[str]:
    """What the domain's text grammar teaches: the labels, fences and bracket forms of its worked
    example's ReAct replies, and every line of its grammar (as the text-mode env states it)."""
    markers: set[str] = set()
    for step in domain_case.domain.prompt.example:
        markers |= set(_LABEL.findall(step.react)) | set(_FENCE.findall(step.react))
        markers |= set(_BRACKET.findall(step.react))
    markers |= {line.strip() for line in grammar.splitlines() if len(line.strip()) >= 12}
    return markers


def render_chat_template(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The conversation as the template's text, rendered as transformers renders a chat template
    (jinja2's immutable sandbox, trim_blocks and lstrip_blocks, a ``tojson`` that keeps Unicode)."""
    environment = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    template = environment.from_string(TEMPLATE.read_text(encoding="utf-8"))
    return template.render(messages=messages, tools=tools, add_generation_prompt=True)


def _base(env: gym.Env[Any, Any]) -> AgentEnv[Any]:
    base = env.unwrapped
    assert isinstance(base, AgentEnv)
    return base


@pytest.fixture(scope="module")
def tools_env(domain_case: DomainCase) -> Iterator[gym.Env[str, str]]:
    env = domain_case.make(action_format="tools")
    yield env
    env.close()


@pytest.fixture(scope="module")
def markers(domain_case: DomainCase) -> set[str]:
    with domain_case.make() as text_env:
        _, info = text_env.reset(seed=0)
    found = text_grammar_markers(domain_case, info["grammar"])
    assert any(m.endswith(":") for m in found), found  # at least the grammar's own labels
    return found


def _leaks(text: str, markers: set[str]) -> list[str]:
    return sorted(m for m in markers if m in text)


def test_check_env_passes_with_the_option(domain_case: DomainCase) -> None:
    for spec in domain_case.domain.envs:
        env = gym.make(spec.id, **domain_case.kwargs, action_format="tools")
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
                check_env(env, skip_render_check=True)
            assert _base(env).action_format == "tools" and _base(env).tool_calls_only
        finally:
            env.close()


def test_the_prompt_states_the_task_and_the_tools_but_no_grammar(tools_env: gym.Env[str, str],
                                                                  markers: set[str]) -> None:
    base = _base(tools_env)
    task = probe_task(base)
    observation, info = tools_env.reset(seed=0, options={"task_id": task.id})
    assert info["grammar"] == "" and task.instruction in observation
    assert _leaks(observation, markers) == []
    assert info["tools"] == [t.json_schema() for t in base.tools] and info["tools"]


def test_a_reply_without_a_call_is_answered_as_under_agentbench_fc(domain_case: DomainCase) -> None:
    """The same replies to ``gym.make(..., action_format="tools", invalid_action="terminate")`` and
    to the evaluator's ``--protocol agentbench-fc --invalid-action terminate`` stack: the same
    observation and issue, and the episode goes on."""
    config = EvalConfig(envs=(domain_case.env_id,), agent="oracle", protocol="agentbench-fc",
                        invalid_action="terminate", backends=(domain_case.kwargs["backend"],))
    fc_stack = default_env_factory(domain_case.env_id, env_options(config, domain_case.env_id))
    env = domain_case.make(action_format="tools", invalid_action="terminate")
    text_reply = domain_case.domain.prompt.example[0].react  # a valid action in the text grammar
    try:
        task = probe_task(_base(env))
        for which in (env, fc_stack):
            which.reset(seed=0, options={"task_id": task.id})
        for step, reply in enumerate((PROSE, text_reply), start=1):
            got = env.step(reply)
            expected = fc_stack.step(reply)
            assert got[0] == expected[0] == NO_CALL_FEEDBACK
            assert got[4]["action_error"]["issue"] == expected[4]["action_error"]["issue"] == "no_call"
            assert expected[4]["reply_class"] == "invalid_format"
            assert got[1:4] == expected[1:4] == (0.0, False, False)
            assert got[4]["step"] == expected[4]["step"] == step
    finally:
        env.close()
        fc_stack.close()


def test_the_oracle_solves_tasks_with_tool_calls(tools_env: gym.Env[str, str]) -> None:
    for task in oracle_sample(_base(tools_env)):
        infos, (_, reward, terminated, truncated, last) = run_reference(tools_env, task)
        assert (reward, terminated, truncated) == (1.0, True, False), (task.id, last.get("finish_detail"))
        assert last["finish_reason"] is FinishReason.COMPLETE, task.id
        assert {i["action"]["form"] for i in infos} == {"json"}, task.id


def _tools_episode(domain_case: DomainCase) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A tools-style conversation: prose, a call of an unknown tool, then the oracle's calls."""
    env = ChatMessages(domain_case.make())  # style "tools" puts the env in tool-calls-only mode
    try:
        base = _base(env)
        task = probe_task(base)
        messages, info = env.reset(seed=0, options={"task_id": task.id})
        messages, *_ = env.step(PROSE)
        assert messages[-2:] == [{"role": "assistant", "content": PROSE}, {"role": "user", "content": NO_CALL_FEEDBACK}]
        env.step(UNKNOWN_TOOL)
        reward = 0.0
        for step in task.reference_solution:
            reply = base.render_action(step)  # the env's format: a JSON call
            if isinstance(reply, OutputReply):
                reply = reply.complete(str(messages[-1]["content"]))
            messages, reward, terminated, truncated, step_info = env.step(reply)
            assert step_info["action"]["form"] == "json"
            if terminated or truncated:
                break
        assert reward == 1.0
        return messages, info
    finally:
        env.close()


def test_a_tools_style_episode_sends_no_text_grammar(domain_case: DomainCase, markers: set[str]) -> None:
    messages, info = _tools_episode(domain_case)
    assert info["grammar"] == ""
    leaks = {i: _leaks(str(m.get("content") or ""), markers) for i, m in enumerate(messages)}
    assert {i: found for i, found in leaks.items() if found} == {}
    calls = [m for m in messages if m.get("tool_calls")]
    assert calls and len(calls) == sum(m["role"] == "tool" for m in messages)


def test_every_message_renders_through_a_tool_aware_chat_template(domain_case: DomainCase,
                                                                  markers: set[str]) -> None:
    messages, info = _tools_episode(domain_case)
    text = render_chat_template(messages, info["tools"])
    # Every tool call, in order, as a <tool_call> block carrying its name and arguments.
    blocks = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.S)
    assert blocks[0] == '{"name": <function-name>, "arguments": <args-json-object>}'  # the template's own line
    rendered_calls = [json.loads(block) for block in blocks[1:]]
    sent_calls = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                  for m in messages for c in m.get("tool_calls") or ()]
    assert rendered_calls == sent_calls
    # Every tool result, in order, as a <tool_response> block; every text turn as itself.
    results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text, re.S)
    assert results == [m["content"] for m in messages if m["role"] == "tool"]
    for message in messages:
        if message["role"] != "tool" and message.get("content"):
            assert message["content"] in text
    for schema in info["tools"]:
        assert json.dumps(schema, ensure_ascii=False) in text
    assert _leaks(text, markers) == []
