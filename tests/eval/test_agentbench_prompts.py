"""``--protocol agentbench`` opens each episode as AgentBench does, with the text of the user's
checkout: instructions as a user turn, the model's acknowledgement, the one-shot, then the task.

The checkout is tests/fixtures/agentbench_checkout: AgentBench's module layout, our own
stand-in text.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.cli.main import main
from agentunit_gym.core.chat import ChatTranscript
from agentunit_gym.errors import AgentBenchCheckoutError
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.tasks.agentbench_checkout import TaskModule, find_checkout, resolve_checkout
from agentunit_gym.wrappers.conversation import StartConversation
from agentunit_gym.wrappers.protocols import scripted_conversation
from agentunit_gym.wrappers.stack import make_eval_env

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "agentbench_checkout"

OS_SHOT = ["STAND-IN OS SHOT QUESTION: how many entries does /srv hold?",
           "Think: STAND-IN count them.\n\nAct: bash\n\n```bash\nls /srv | wc -l\n```",
           "The output of the OS:\n3", "Think: STAND-IN three.\n\nAct: answer(3)"]
KG_SHOT = ["Question: STAND-IN which rivers cross Ruritania? \nEntities: [Ruritania]",
           "Thought: STAND-IN relations first.\nAction: get_relations(Ruritania)",
           "Observation: [geo.country.rivers]", "Thought: STAND-IN follow it.\nFinal Answer: #0"]
KG_INSTRUCTIONS = "\nSTAND-IN KG INSTRUCTIONS: call the seven tools, one a turn, then 'Final Answer: #id'.\n"


def _opening(env_id: str, domain: str, **env_kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    """The messages a chat agent sends first under the protocol with the fixture checkout, and the task."""
    conversation = scripted_conversation(domain, "agentbench", str(CHECKOUT))
    assert conversation is not None
    with StartConversation(gym.make(env_id, **env_kwargs), conversation) as env:
        observation, info = env.reset(seed=3)
        task = env.unwrapped.task  # type: ignore[attr-defined]
    chat = ChatTranscript("react")
    chat.start(info)
    chat.add_observation(observation)
    return chat.messages, task


def test_os_opening_is_instructions_with_the_shot_question_then_the_shot_then_the_task() -> None:
    messages, task = _opening("AgentUnit/OS-v0", "os", backend="local")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    # AgentBench's OS loop: the instructions and the one-shot's question share the first user turn.
    assert messages[0]["content"] == ("STAND-IN OS INSTRUCTIONS: act like a shell user.\n\n"
                                      f"STAND-IN OPENER: {OS_SHOT[0]}")
    assert [m["content"] for m in messages[1:4]] == OS_SHOT[1:]
    assert messages[4]["content"] == f"STAND-IN NEW PROBLEM: {task.instruction}"


def test_db_opening_is_instructions_acknowledgement_then_question_and_table() -> None:
    messages, task = _opening("AgentUnit/DB-v0", "db", backend="sqlite")
    assert messages == [
        {"role": "user",
         "content": "\nSTAND-IN DB INSTRUCTIONS: answer with SQL.\nAction: Operation / Action: Answer\n"},
        {"role": "assistant", "content": "STAND-IN DB OK."},
        {"role": "user", "content": f"{task.instruction}\n{task.description}"},
    ]
    assert task.description  # the table description fills the second slot


def test_kg_opening_is_instructions_acknowledgement_shot_then_question_and_entities() -> None:
    messages, task = _opening("AgentUnit/KG-v0", "kg")
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3 + ["user"]
    assert messages[0]["content"] == KG_INSTRUCTIONS
    assert messages[1]["content"] == "STAND-IN KG UNDERSTOOD."
    assert [m["content"] for m in messages[2:6]] == KG_SHOT
    names = ", ".join(task.entities)
    assert messages[6]["content"] == f"STAND-IN QUESTION: {task.instruction}\nSTAND-IN ENTITIES: [{names}]"
    # None of our own prompt: no system message, no tool list of ours.
    assert not any("get_relations(variable: var)" in m["content"] for m in messages)


def test_webshop_opening_is_instructions_acknowledgement_shot_then_the_first_page() -> None:
    messages, task = _opening("AgentUnit/WebShop-v0", "webshop")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == "\nSTAND-IN WEBSHOP INSTRUCTIONS: search[...] or click[...].\n"
    assert messages[2]["content"] == "Observation:\nSTAND-IN SHOT PAGE\n\nAvailable Actions:\n{}"
    page = messages[4]["content"]
    assert page.startswith(f"STAND-IN PAGE:\nWebShop [SEP] Instruction: [SEP] {task.instruction} [SEP] Search\n\n")
    # The page's actions fill the second slot; our page guide and grammar are left out.
    assert page.endswith('STAND-IN ACTIONS:\n{"has_search_bar": true, "clickables": ["search"]}')
    assert "Reply with your reasoning" not in page


def test_the_trace_records_the_task_turn_the_agent_read(tmp_path: Path) -> None:
    conversation = scripted_conversation("db", "agentbench", str(CHECKOUT))
    with make_eval_env("AgentUnit/DB-v0", backend="sqlite", conversation=conversation) as env:
        observation, info = env.reset(seed=1)
        assert info["chat_head"][1] == {"role": "assistant", "content": "STAND-IN DB OK."}
        assert info["prompt_source"].endswith("dbbench/__init__.py")
        *_, info = env.step("Action: Answer\nFinal Answer: []")
    assert info["trace"].prompt == observation and "You are working with" not in observation


def test_checkout_found_above_a_tasks_path_and_refused_when_not_one(tmp_path: Path) -> None:
    data = CHECKOUT / "src" / "server" / "tasks" / "dbbench" / "__init__.py"
    assert find_checkout(data) == CHECKOUT
    assert resolve_checkout(None, [str(tmp_path), str(data)]) == CHECKOUT
    assert resolve_checkout(None, [str(tmp_path)]) is None
    with pytest.raises(AgentBenchCheckoutError, match="--agentbench-root .*src/server/tasks"):
        resolve_checkout(tmp_path)


def test_a_checkout_laid_out_otherwise_is_a_typed_error_naming_the_file(tmp_path: Path) -> None:
    copy = tmp_path / "AgentBench"
    shutil.copytree(CHECKOUT, copy)
    (copy / "src/server/tasks/dbbench/__init__.py").unlink()  # the function-calling release has task.py only
    with pytest.raises(AgentBenchCheckoutError, match=r"dbbench/__init__\.py: cannot read it"):
        scripted_conversation("db", "agentbench", str(copy))
    kg = copy / "src/server/tasks/knowledgegraph/task.py"
    kg.write_text(kg.read_text() + "\nONE_SHOT = list(ONE_SHOT)\n")
    with pytest.raises(AgentBenchCheckoutError, match="a literal value of ONE_SHOT"):
        scripted_conversation("kg", "agentbench", str(copy))
    with pytest.raises(AgentBenchCheckoutError, match=r"the function _judge\(\)"):
        TaskModule(copy, "webshop/__init__.py").injected("_judge")  # the OS module's loop, not the shop's


def _answer_empty(body: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "Action: Answer\nFinal Answer: []"}


def test_eval_sends_the_checkout_opening_and_says_where_the_prompts_came_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agent", "openai:m",
            "--protocol", "agentbench", "--no-endpoint-check"]
    with FakeChatServer(_answer_empty) as server:
        code = main([*base, "--base-url", server.base_url, "--agentbench-root", str(CHECKOUT),
                     "--output", str(tmp_path / "ab")])
    assert code == 0
    out = capsys.readouterr()
    assert f"DB-v0: prompts from {CHECKOUT}/src/server/tasks/dbbench/__init__.py" in out.err
    assert f"prompts: AgentBench's, read from the checkout {CHECKOUT}" in out.out
    first = server.requests[0]["messages"]
    assert [m["role"] for m in first] == ["user", "assistant", "user"]
    assert first[1]["content"] == "STAND-IN DB OK."
    config = json.loads((tmp_path / "ab" / "config.json").read_text())
    assert config["agentbench_root"] == str(CHECKOUT)
    report = (tmp_path / "ab" / "report.html").read_text()
    assert f"prompts: AgentBench's, read from the checkout {CHECKOUT}" in html.unescape(report)
    # The export rebuilds the conversation the model saw, the checkout's opening included.
    from agentunit_gym.eval.record.export import export_run

    export_run(tmp_path / "ab", tmp_path / "ab.jsonl")
    [row] = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert row["messages"][:3] == first and row["messages"][3]["role"] == "assistant"

    with FakeChatServer(_answer_empty) as server:
        assert main([*base, "--base-url", server.base_url, "--output", str(tmp_path / "own")]) == 0
    out = capsys.readouterr()
    assert "without an AgentBench checkout: the agent gets agentunit-gym's own prompt" in out.err
    assert "prompts: agentunit-gym's own (no AgentBench checkout was given)" in out.out
    assert server.requests[0]["messages"][0]["role"] == "system"
    assert json.loads((tmp_path / "own" / "config.json").read_text())["agentbench_root"] is None


def test_agentbench_root_needs_the_agentbench_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "1", "--agentbench-root", str(CHECKOUT),
                 "--output", str(tmp_path / "x")])
    assert code == 2
    assert "--agentbench-root gives AgentBench's prompts to --protocol agentbench" in capsys.readouterr().err


def test_a_checkout_found_above_tasks_is_used_and_one_of_another_release_is_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.domains.db.test_agentbench import DEV

    checkout = tmp_path / "AgentBench"
    shutil.copytree(CHECKOUT, checkout)
    data = checkout / "data" / "dbbench" / "dev.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text(json.dumps(DEV[0]) + "\n", encoding="utf-8")
    base = ["eval", "--tasks", str(data), "--backend", "sqlite", "--agent", "openai:m", "--protocol", "agentbench",
            "--no-endpoint-check", "--quiet"]
    with FakeChatServer(_answer_empty) as server:
        assert main([*base, "--base-url", server.base_url, "--output", str(tmp_path / "found")]) == 0
    assert [m["role"] for m in server.requests[0]["messages"]] == ["user", "assistant", "user"]
    assert json.loads((tmp_path / "found" / "config.json").read_text())["agentbench_root"] == str(checkout)
    capsys.readouterr()

    (checkout / "src/server/tasks/dbbench/__init__.py").unlink()  # as in the function-calling release
    with FakeChatServer(_answer_empty) as server:
        assert main([*base, "--base-url", server.base_url, "--output", str(tmp_path / "other")]) == 0
    err = capsys.readouterr().err
    assert f"the AgentBench checkout {checkout} (found above --tasks) does not hold" in " ".join(err.split())
    assert server.requests[0]["messages"][0]["role"] == "system"
    assert json.loads((tmp_path / "other" / "config.json").read_text())["agentbench_root"] is None
    # Asked for by name, the same checkout stops the run before its first episode.
    assert main([*base, "--agentbench-root", str(checkout), "--base-url", "http://127.0.0.1:9/v1",
                 "--output", str(tmp_path / "named")]) == 2
    assert "dbbench/__init__.py: cannot read it" in capsys.readouterr().err


def test_a_scripted_conversation_pickles_and_alternates_from_user() -> None:
    import pickle

    from agentunit_gym.core.conversation import ScriptedConversation
    from agentunit_gym.domains.kg.prompt import agentbench_task_values
    from agentunit_gym.tasks.agentbench_checkout import Slot, Template

    conversation = scripted_conversation("kg", "agentbench", str(CHECKOUT))
    assert conversation is not None
    again = pickle.loads(pickle.dumps(conversation))  # envs travel to worker processes with it
    assert again.messages() == conversation.messages() and again.task == conversation.task
    with pytest.raises(AgentBenchCheckoutError, match="alternate user / assistant"):
        ScriptedConversation((("assistant", "hi"),), Template(("Q: ", Slot(0))), agentbench_task_values, "x")
