"""Tool-calls-only mode (``--protocol agentbench-fc``): no text grammar shown, prose never run.

Every registered domain, on its embedded backend."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from agentunit_gym.core.env import NO_TOOL_CALL_HINT, NO_TOOL_CALL_MESSAGE, is_tool_call, without_grammar
from agentunit_gym.core.registry import domains
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.info import agent_env

TEXT_GRAMMAR_MARKERS = ("Act:", "Action:", "Thought:", "Final Answer:", "```sql", "search[", "click[")
"""What the ReAct grammars of the four domains teach; none of it may reach an FC prompt."""

DOMAINS = [d for d in domains() if d.name in ("os", "db", "kg", "webshop")]
NO_CALL_FEEDBACK = f"Invalid format: {NO_TOOL_CALL_MESSAGE} {NO_TOOL_CALL_HINT}"


def _env(domain_name: str) -> gym.Env[str, str]:
    domain = next(d for d in DOMAINS if d.name == domain_name)
    return gym.make(domain.env_ids[0], backend=domain.embedded_backend.name)


@pytest.mark.parametrize("name", [d.name for d in DOMAINS])
def test_first_observation_has_no_text_grammar(name: str) -> None:
    with _env(name) as env:
        text_obs, text_info = env.reset(seed=0)
        # The default mode states the grammar verbatim (else there is nothing to take out).
        assert text_info["grammar"] and text_info["grammar"] in text_obs
        agent_env(env).require_tool_calls()
        obs, info = env.reset(seed=0)
    assert info["grammar"] == ""
    assert text_info["grammar"] not in obs
    assert [m for m in TEXT_GRAMMAR_MARKERS if m in obs] == []
    assert "\n\n\n" not in obs
    # Everything else is kept: the task itself is still there.
    assert info["instruction"].split("\n")[0][:40] in obs


@pytest.mark.parametrize("name", [d.name for d in DOMAINS])
def test_a_valid_react_reply_is_not_run_and_the_episode_goes_on(name: str) -> None:
    domain = next(d for d in DOMAINS if d.name == name)
    react = domain.prompt.example[0].react  # a reply the domain's text parser accepts
    with _env(name) as env:
        agent_env(env).require_tool_calls()
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(react)
        assert obs == NO_CALL_FEEDBACK
        assert info["action_error"]["issue"] == "no_call" and info["action"] == {}
        assert (reward, terminated, truncated, info["step"]) == (0.0, False, False, 1)
        agent_env(env).require_tool_calls(False)
        env.reset(seed=0)
        _, _, _, _, info = env.step(react)
        assert info["action_error"] == {}  # the same text is an action in the default mode


def test_json_in_the_message_content_is_not_a_tool_call() -> None:
    call = '{"name": "execute_sql", "arguments": {"query": "SELECT 1;"}}'
    prose = AgentReply(call, None, {"role": "assistant", "content": call})
    real = AgentReply(call, None, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "execute_sql", "arguments": '{"query": "SELECT 1;"}'}}]})
    assert not is_tool_call(prose) and is_tool_call(real)
    assert is_tool_call(call)  # an agent without messages writes its calls as JSON text
    with _env("db") as env:
        agent_env(env).require_tool_calls()
        env.reset(seed=0)
        obs, _, _, _, info = env.step(prose)
        assert obs == NO_CALL_FEEDBACK
        obs, _, _, _, info = env.step(real)
        assert info["action"]["tool"] == "execute_sql" and json.loads(json.dumps(info["action_error"])) == {}
        assert info["step"] == 2  # the reply without a call took a turn, as AgentBench FC's round loop does


def test_without_grammar_closes_up_and_refuses_a_partial_copy() -> None:
    assert without_grammar("Intro.\n\nGRAMMAR\nmore\n\nTask: x", "GRAMMAR\nmore") == "Intro.\n\nTask: x"
    assert without_grammar("GRAMMAR\n\nTask: x", "GRAMMAR") == "Task: x"
    # A prompt that never states the grammar (a third-party env leaving it to the system message) is kept.
    assert without_grammar("Task: Say 42.", "Act: echo(<text>) or Act: answer(<text>)") == "Task: Say 42."
    # One that states a line of it but not all of it verbatim cannot be cleaned: refused.
    with pytest.raises(ConfigError, match="verbatim"):
        without_grammar("Intro.\nReply with Act: bash\n\nTask: x", "Reply with Act: bash\nor Act: answer(X)")


def test_a_batch_of_copies_in_tool_calls_only_mode_takes_calls_and_answers_garbage() -> None:
    # A trainer's batch: 4 copies in a gymnasium vector env, half the replies garbage. The calls
    # run, prose and junk get the no-call answer, nobody's episode ends, every step is counted.
    def make() -> gym.Env[str, str]:
        env = _env("db")
        agent_env(env).require_tool_calls()
        return env

    call = '{"name": "execute_sql", "arguments": {"query": "SELECT 1;"}}'
    envs = gym.vector.SyncVectorEnv([make] * 4)
    try:
        envs.reset(seed=0)
        for _ in range(2):
            obs, rewards, terminated, truncated, info = envs.step((call, "Action: Operation\n```sql\nSELECT 1;\n```",
                                                                    "\x00\ufffd{{", call))
            assert [o == NO_CALL_FEEDBACK for o in obs] == [False, True, True, False]
            assert [i or "" for i in info["action_error"]["issue"]] == ["", "no_call", "no_call", ""]
            assert not terminated.any() and not truncated.any() and rewards.tolist() == [0.0] * 4
        assert info["step"].tolist() == [2, 2, 2, 2]
    finally:
        envs.close()


def test_gym_make_takes_the_action_format_and_refuses_an_unknown_one() -> None:
    with _env("db") as text_env, gym.make("AgentUnit/DB-v0", backend="sqlite", action_format="tools") as tools_env:
        assert (agent_env(text_env).action_format, agent_env(tools_env).action_format) == ("text", "tools")
        assert agent_env(tools_env).tool_calls_only
        # The oracle writes the env's format unless told otherwise.
        tools_env.reset(seed=0)
        step = agent_env(tools_env).task.reference_solution[0]  # type: ignore[union-attr]
        assert json.loads(agent_env(tools_env).render_action(step))["name"] == step.tool
        assert agent_env(tools_env).render_action(step, "react").startswith("Action: Operation")
        text_env.reset(seed=0)
        assert agent_env(text_env).render_action(step).startswith("Action: Operation")
    with pytest.raises(ConfigError, match="action_format must be 'text' or 'tools', got 'json'"):
        gym.make("AgentUnit/DB-v0", backend="sqlite", action_format="json")


def test_under_the_terminate_policy_only_a_reply_without_a_call_goes_on() -> None:
    with gym.make("AgentUnit/DB-v0", backend="sqlite", action_format="tools", invalid_action="terminate") as env:
        env.reset(seed=0)
        _, _, terminated, _, info = env.step("SELECT 1;")
        assert (info["action_error"]["issue"], terminated) == ("no_call", False)
        _, _, terminated, _, info = env.step('{"name": "drop_table", "arguments": {}}')
        assert (info["action_error"]["issue"], terminated) == ("unknown_tool", True)
        assert info["finish_reason"] == "invalid_action"


def test_the_example_in_docs_core_runs(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "core.md").read_text(encoding="utf-8")
    section = doc.split("## Tool-calls-only mode\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    exec(compile(block, "docs/core.md (Tool-calls-only mode)", "exec"), {"__name__": "docs_core"})
    expected = [line.split("  # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
    assert capsys.readouterr().out.splitlines() == expected
