from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from agentunit_gym.backends.sql.base import SQLBackend
from agentunit_gym.backends.sql.sqlite import SQLiteBackend
from agentunit_gym.core import FinishReason
from agentunit_gym.domains.db.env import DBEnv, render_rows
from agentunit_gym.domains.db.task import DBTask
from agentunit_gym.errors import EpisodeStateError

PEOPLE = {
    "name": "people",
    "columns": [{"name": "name", "type": "TEXT"}, {"name": "age", "type": "INTEGER"},
                {"name": "city", "type": "TEXT"}],
    "rows": [["Ann", "71", "Lyon"], ["Bob", "34", "Porto"], ["Cem", "52", "Izmir"],
             ["Dia", "29", "Lyon"], ["Eva", "45", "Oslo"]],
}
DESCRIPTION = "The table is named people; its columns are name, age, city."

OLDEST = DBTask.model_validate({
    "id": "oldest", "type": "ranking", "instruction": "Who is the oldest person?", "description": DESCRIPTION,
    "tables": [PEOPLE], "answer": ["Ann"], "reference_sql": ["SELECT name FROM people ORDER BY age DESC LIMIT 1"],
})
LYON = DBTask.model_validate({
    "id": "lyon", "type": "other", "instruction": "Who lives in Lyon?", "description": DESCRIPTION,
    "tables": [PEOPLE], "answer": ["Ann", "Dia"], "reference_sql": ["SELECT name FROM people WHERE city = 'Lyon'"],
})
BIRTHDAY = DBTask.model_validate({
    "id": "birthday", "type": "UPDATE", "instruction": "Bob turned 35: update his age.", "description": DESCRIPTION,
    "tables": [PEOPLE], "reference_sql": ["UPDATE people SET age = 35 WHERE name = 'Bob'"],
})
TASKS = [OLDEST, LYON, BIRTHDAY]

SLOW_QUERY = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
    "mysql": "SELECT SLEEP(5)",
}


def sql(query: str) -> str:
    return f"Let me look.\nAction: Operation\n```sql\n{query}\n```"


def answer(values: list[str]) -> str:
    return "Action: Answer\nFinal Answer: " + json.dumps(values)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("mysql", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> Iterator[SQLBackend]:
    if request.param == "sqlite":
        engine: SQLBackend = SQLiteBackend()
    else:
        from agentunit_gym.backends.sql.factory import open_sql_backend

        engine = open_sql_backend("mysql")
    yield engine
    engine.close()


@pytest.fixture
def env(backend: SQLBackend) -> Iterator[DBEnv]:
    e = DBEnv(sql_backend=backend, tasks=TASKS)
    yield e
    e.close()


def test_prompt_and_info(env: DBEnv, backend: SQLBackend) -> None:
    prompt, info = env.reset(options={"task_id": "oldest"})
    assert "Question: Who is the oldest person?" in prompt
    assert prompt.rstrip().endswith(DESCRIPTION)
    assert "Action: Operation" in prompt and "Final Answer:" in prompt and "```sql" in prompt
    assert info["backend"] == backend.kind == env.backend_name
    assert info["max_steps"] == 15 and info["category"] == "ranking"
    assert [t["function"]["name"] for t in info["tools"]] == ["execute_sql", "submit_answer", "commit"]


def test_operation_then_answer_scores_one(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    obs, reward, term, trunc, info = env.step(sql("SELECT name, age FROM people ORDER BY age DESC LIMIT 2"))
    assert obs == "[('Ann', 71), ('Cem', 52)]"
    assert (reward, term, trunc, info["finish_reason"]) == (0.0, False, False, "")
    assert info["execution"]["rowcount"] == 2 and info["execution"]["columns"] == ["name", "age"]
    assert info["thought"] == "Let me look."
    obs, reward, term, _, info = env.step("Thought: done.\n" + answer(["Ann"]))
    assert (reward, term) == (1.0, True)
    assert info["finish_reason"] is FinishReason.COMPLETE
    comp = info["score"]["components"]
    # A part that does not apply (None in the Score) is left out of info (docs/core.md, "Info keys").
    assert comp["answer_match"] is True and comp["exact_match"] is True and "hash_match" not in comp
    assert (comp["type"], comp["category"], comp["family"]) == ("ranking", "ranking", "SELECT")


def test_wrong_and_partial_answers_score_zero(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    _, reward, term, _, info = env.step(answer(["Cem"]))
    assert (reward, term, info["score"]["components"]["answer_match"]) == (0.0, True, False)
    env.reset(options={"task_id": "lyon"})
    _, reward, _, _, _ = env.step(answer(["Ann"]))
    assert reward == 0.0
    env.reset(options={"task_id": "lyon"})
    _, reward, _, _, _ = env.step("Action: Answer\nFinal Answer: ['Dia', 'Ann']")
    assert reward == 1.0  # several values compare as sets
    env.reset(options={"task_id": "lyon"})
    _, reward, _, _, _ = env.step('Action: Answer\nFinal Answer: ["Ann",\n "Dia"]\nBoth live there [checked].')
    assert reward == 1.0  # a list over two lines, prose after it
    env.reset(options={"task_id": "oldest"})
    _, reward, _, _, _ = env.step('Action: Answer\nFinal Answer: ["Ann"]\nShe is 71 [per the table].')
    assert reward == 1.0


def test_only_the_first_sql_block_runs(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    reply = sql("SELECT COUNT(*) FROM people") + "\nand then\n```sql\nDELETE FROM people\n```"
    obs, *_ = env.step(reply)
    assert obs == "[(5,)]"
    obs, *_ = env.step(sql("SELECT COUNT(*) FROM people"))
    assert obs == "[(5,)]"  # the DELETE in the second block never ran


def test_invalid_replies_are_classified(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    cases = [
        ("I think it is Ann.", "invalid_format", "no_call"),
        ("Action: Delete\n```sql\nDELETE FROM people\n```", "invalid_action", "unknown_tool"),
        ("Action: Operation\nSELECT 1", "invalid_format", "malformed"),
        ("Action: Answer\nAnn", "invalid_format", "malformed"),
        ('{"name": "commit", "arguments": {}}', "invalid_action", "not_allowed"),
        ('{"name": "run_sql", "arguments": {"query": "SELECT 1"}}', "invalid_action", "unknown_tool"),
    ]
    for reply, reason, issue in cases:
        obs, reward, term, _, info = env.step(reply)
        assert (info["action_error"]["reason"], info["action_error"]["issue"]) == (reason, issue), reply
        assert not term and reward == 0.0 and obs.startswith("Invalid")
    obs, *_ = env.step(sql("SELECT COUNT(*) FROM people"))
    assert obs == "[(5,)]"  # nothing above touched the database


def test_terminate_policy_ends_on_not_allowed_commit(backend: SQLBackend) -> None:
    with DBEnv(sql_backend=backend, tasks=TASKS, invalid_action="terminate") as env:
        env.reset(options={"task_id": "oldest"})
        _, reward, term, _, info = env.step('{"name": "commit", "arguments": {}}')
        assert term and reward == 0.0 and info["finish_reason"] is FinishReason.INVALID_ACTION


def test_json_tool_calls(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    call = {"name": "execute_sql", "arguments": {"query": "SELECT age FROM people WHERE name = 'Eva'"}}
    obs, _, _, _, info = env.step(json.dumps(call))
    assert obs == "[(45,)]" and info["action"]["form"] == "json"
    _, reward, term, _, info = env.step('{"name": "submit_answer", "arguments": {"answer": "[\\"Ann\\"]"}}')
    assert (reward, term) == (1.0, True)
    assert info["action"]["arguments"] == {"answer": ["Ann"]}
    env.reset(options={"task_id": "oldest"})
    _, reward, _, _, _ = env.step(json.dumps({"name": "submit_answer", "arguments": {"answer": "Ann"}}))
    assert reward == 1.0
    env.reset(options={"task_id": "oldest"})
    _, _, term, _, info = env.step(json.dumps({"name": "submit_answer", "arguments": {"answer": {"x": 1}}}))
    assert not term and info["action_error"]["issue"] == "invalid_parameter"


@pytest.mark.parametrize("reply", [
    "```json\n" + json.dumps({"name": "submit_answer", "arguments": {"answer": '["Ann", "Dia"]'}}) + "\n```",
    json.dumps({"type": "function",
                "function": {"name": "submit_answer", "arguments": json.dumps({"answer": ["Dia", "Ann"]})}}),
    json.dumps({"name": "submit_answer", "parameters": {"answer": "['Ann', 'Dia']"}}),
], ids=["fenced-string", "function-wrapper", "parameters-python-list"])
def test_json_answer_in_every_accepted_form(env: DBEnv, reply: str) -> None:
    env.reset(options={"task_id": "lyon"})
    _, reward, term, _, info = env.step(reply)
    assert (reward, term) == (1.0, True), info.get("action_error")
    assert sorted(info["action"]["arguments"]["answer"]) == ["Ann", "Dia"]


def test_json_answer_numbers_become_text(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    _, _, term, _, info = env.step('{"name": "submit_answer", "arguments": {"answer": [71, 2.5]}}')
    assert term and info["action"]["arguments"] == {"answer": ["71", "2.5"]}
    env.reset(options={"task_id": "oldest"})
    _, _, term, _, info = env.step('{"name": "submit_answer", "arguments": {"answer": 71}}')
    assert term and info["action"]["arguments"] == {"answer": ["71"]}


def test_modification_graded_by_table_hash(env: DBEnv) -> None:
    env.reset(options={"task_id": "birthday"})
    obs, _, _, _, info = env.step(sql("UPDATE people SET age = 35 WHERE name = 'Bob'"))
    assert obs == "[]" and not info["execution_error"]
    _, reward, term, _, info = env.step('{"name": "commit", "arguments": {}}')
    comp = info["score"]["components"]
    assert (reward, term, comp["hash_match"], comp["family"]) == (1.0, True, True, "UPDATE")
    assert comp["expected_hash"] == comp["actual_hash"] and len(str(comp["expected_hash"])) == 32
    # AgentBench agents end a modification with an (ignored) answer: accepted, graded by hash.
    env.reset(options={"task_id": "birthday"})
    env.step(sql("UPDATE people SET age = 35 WHERE name = 'Bob'"))
    _, reward, _, _, _ = env.step(answer([]))
    assert reward == 1.0
    env.reset(options={"task_id": "birthday"})
    env.step(sql("UPDATE people SET age = 36 WHERE name = 'Bob'"))
    _, reward, _, _, info = env.step(answer([]))
    assert reward == 0.0 and info["score"]["components"]["hash_match"] is False
    env.reset(options={"task_id": "birthday"})
    _, reward, _, _, _ = env.step(answer([]))  # nothing changed
    assert reward == 0.0


def test_sql_error_is_an_observation(env: DBEnv) -> None:
    env.reset(options={"task_id": "oldest"})
    obs, reward, term, _, info = env.step(sql("SELEC name FROM people"))
    assert obs.startswith("Error: ") and info["execution_error"] is True and info["execution"]["error"]
    assert not term and reward == 0.0
    obs, _, _, _, _ = env.step(sql("SELECT missing_column FROM people"))
    assert obs.startswith("Error: ")


def test_row_and_character_caps(backend: SQLBackend) -> None:
    with DBEnv(sql_backend=backend, tasks=TASKS, max_rows_shown=2, observation_limit=100) as env:
        env.reset(options={"task_id": "oldest"})
        obs, _, _, _, info = env.step(sql("SELECT name FROM people ORDER BY name"))
        assert obs == "[('Ann',), ('Bob',)]\n[2 of 5 rows shown]"
        assert info["execution"]["truncated"] is True and info["execution"]["rowcount"] == 5
        obs, _, _, _, info = env.step(sql("SELECT REPEAT('x', 300)" if backend.kind == "mysql"
                                          else "SELECT printf('%.300c', 'x')"))
        assert obs.startswith("[('xxxx") and obs.endswith("[output truncated: 100 of 307 characters shown]")
        assert obs == "[('" + "x" * 97 + "\n[output truncated: 100 of 307 characters shown]"
        assert info["execution"]["observation_chars"] == 307
        # admin_run is not the agent's view: neither capped nor cut.
        admin = env.admin_run("SELECT REPEAT('x', 300)" if backend.kind == "mysql" else "SELECT printf('%.300c', 'x')")
        assert admin.observation == "[('" + "x" * 300 + "',)]" and admin.details["truncated"] is False


def test_timeout_is_an_observation_and_the_episode_goes_on(backend: SQLBackend) -> None:
    with DBEnv(sql_backend=backend, tasks=TASKS, statement_timeout=0.5) as env:
        env.reset(options={"task_id": "oldest"})
        obs, _, term, _, info = env.step(sql(SLOW_QUERY[backend.kind]))
        assert info["execution"]["timed_out"] is True and not term
        assert obs == "Error: the statement did not finish within 0.5 s and was cancelled."
        obs, *_ = env.step(sql("SELECT COUNT(*) FROM people"))
        assert obs == "[(5,)]"


def test_admin_run_plants_state(env: DBEnv) -> None:
    with pytest.raises(EpisodeStateError):
        env.admin_run("SELECT 1")
    env.reset(options={"task_id": "oldest"})
    planted = env.admin_run("UPDATE people SET age = 99 WHERE name = 'Eva'")
    assert not planted.error
    assert env.admin_run("SELECT name FROM people WHERE age = 99").observation == "[('Eva',)]"
    _, reward, _, _, _ = env.step(answer(["Ann"]))
    assert reward == 1.0  # SELECT answers are graded against the task's gold values, not the live state
    assert env.steps == 1  # admin_run is not a step


def test_step_limit_records_state_but_no_reward(backend: SQLBackend) -> None:
    with DBEnv(sql_backend=backend, tasks=TASKS, max_steps=1) as env:
        env.reset(options={"task_id": "birthday"})
        _, reward, term, trunc, info = env.step(sql("UPDATE people SET age = 35 WHERE name = 'Bob'"))
        assert (reward, term, trunc) == (0.0, False, True)
        assert info["finish_reason"] is FinishReason.TASK_LIMIT
        assert info["score"]["components"]["state_correct"] is True


def test_check_env_on_the_bundled_suite(backend: SQLBackend) -> None:
    with DBEnv(sql_backend=backend) as env:
        check_env(env, skip_render_check=True)
        assert len(env.tasks) >= 60


def test_closing_the_env_leaves_a_given_backend_open(backend: SQLBackend) -> None:
    env = DBEnv(sql_backend=backend, tasks=TASKS)
    env.reset(options={"task_id": "oldest"})
    env.close()
    env.close()
    with pytest.raises(EpisodeStateError):
        env.reset()
    with DBEnv(sql_backend=backend, tasks=TASKS) as again:  # the backend still works
        again.reset(options={"task_id": "oldest"})
        assert again.step(sql("SELECT COUNT(*) FROM people"))[0] == "[(5,)]"


def test_gym_make_sqlite() -> None:
    import agentunit_gym  # noqa: F401 - registers the ids

    env = gym.make("AgentUnit/DB-v0", backend="sqlite", tasks=TASKS)
    try:
        obs, info = env.reset(options={"task_id": "oldest"})
        assert info["backend"] == "sqlite" and "oldest" in obs
        assert env.step(answer(["Ann"]))[1] == 1.0
    finally:
        env.close()


def test_render_rows_format() -> None:
    assert render_rows(()) == "[]"
    assert render_rows((("a",),)) == "[('a',)]"
    assert render_rows(((Decimal("3.50"), None, b"hi", 2.5, "it's"),)) == "[(3.50, None, 'hi', 2.5, \"it's\")]"


def test_auto_without_docker_picks_sqlite_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from agentunit_gym.backends import process

    monkeypatch.setattr(process, "docker_available", lambda *a, **k: False)
    monkeypatch.delenv("AGENTUNIT_MYSQL_DSN", raising=False)
    with caplog.at_level("INFO", logger="agentunit_gym"), DBEnv(backend="auto", tasks=TASKS) as env:
        assert env.backend_name == "sqlite"
    assert any("sqlite" in r.getMessage() for r in caplog.records)


@pytest.mark.docker
def test_auto_with_docker_picks_mysql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTUNIT_MYSQL_DSN", raising=False)
    with DBEnv(backend="auto", tasks=TASKS) as env:
        assert env.backend_name == "mysql"
        env.reset(options={"task_id": "oldest"})
        assert env.step(answer(["Ann"]))[1] == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [{"backend": "postgres"}, {"statement_timeout": 0}, {"max_rows_shown": 0}, {"observation_limit": 10},
     {"invalid_action": "explode"}],
)
def test_bad_options_raise_config_error(kwargs: dict[str, object]) -> None:
    from agentunit_gym.errors import ConfigError

    with pytest.raises(ConfigError, match=next(iter(kwargs))):  # the message names the option
        DBEnv(tasks=TASKS, **kwargs)  # type: ignore[arg-type]
