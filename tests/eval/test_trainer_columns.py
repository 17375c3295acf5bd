"""What verl reads from an exported row (issue 33, item 8): ``agent_name``, the episode in
``extra_info.tools_kwargs`` and ``extra_info.interaction_kwargs``, and a ``reward_model`` whose
ground truth scores the reply's text where the domain allows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.scoring import answers_match, parse_final_answer
from agentunit_gym.eval.evaluate import evaluate
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.export import export_run
from agentunit_gym.eval.record.trainer_columns import INTERACTION_NAME, VERL_AGENT_NAME, tool_names
from tests.cli.clitools import cli


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _run(tmp_path: Path, env: str, backend: str, task_ids: tuple[str, ...]) -> Path:
    run = tmp_path / f"run-{env}"
    evaluate(EvalConfig(envs=(env,), backends=(backend,), agent="oracle", task_ids=task_ids, seed=5), run)
    return run


def _final_answer(row: dict[str, Any]) -> str:
    """The text after ``Final Answer:`` in the row's last assistant message (the ReAct reply)."""
    last = [m for m in row["messages"] if m["role"] == "assistant"][-1]
    return str(last["content"]).split("Final Answer:", 1)[1].strip()


def test_db_answers_score_from_the_reply_text(tmp_path: Path) -> None:
    suite = {t.id: t for t in get_domain("db").bundled_tasks()}
    selects = sorted(i for i, t in suite.items() if t.answer_key() is not None)[:3]
    modification = sorted(i for i, t in suite.items() if t.answer_key() is None)[0]
    run = _run(tmp_path, "DB-v0", "sqlite", (*selects, modification))
    export_run(run, tmp_path / "db.jsonl", style="react")
    rows = {r["task_id"]: r for r in _rows(tmp_path / "db.jsonl")}
    assert set(rows) == {*selects, modification}
    for task_id in selects:
        truth = rows[task_id]["reward_model"]
        assert truth == {"style": "rule", "ground_truth": json.dumps(list(suite[task_id].answer or ()))}
        # A reward function with only the row's text: the oracle's answer matches, another does not.
        gold = json.loads(truth["ground_truth"])
        assert answers_match(parse_final_answer(_final_answer(rows[task_id])), gold)
        assert not answers_match(parse_final_answer('["not the answer"]'), gold)
    # A modification is graded by the table's hash after the episode: no text holds it.
    assert rows[modification]["reward_model"] == {"style": "env", "ground_truth": ""}


def test_kg_ground_truth_is_the_gold_set_the_env_scores(tmp_path: Path) -> None:
    suite = sorted(get_domain("kg").bundled_tasks(), key=lambda t: t.id)[:2]
    run = _run(tmp_path, "KG-v0", "embedded", tuple(t.id for t in suite))
    export_run(run, tmp_path / "kg.jsonl")
    for row in _rows(tmp_path / "kg.jsonl"):
        task = next(t for t in suite if t.id == row["task_id"])
        assert row["reward_model"] == {"style": "env", "ground_truth": json.dumps(list(task.answer))}
        # The reply commits a variable (#n); the env's score holds the entities it resolved to.
        committed = json.loads(json.loads(row["score"])["components"]["answer"])
        assert set(committed) == set(json.loads(row["reward_model"]["ground_truth"]))
        assert "Final Answer: #" in [m for m in row["messages"] if m["role"] == "assistant"][-1]["content"]


def test_the_agent_loop_columns_replay_the_episode(tmp_path: Path) -> None:
    run = _run(tmp_path, "DB-v0", "sqlite", ("db-weather-03", "db-cars-03"))
    export_run(run, tmp_path / "db.jsonl")
    for row in _rows(tmp_path / "db.jsonl"):
        assert row["agent_name"] == VERL_AGENT_NAME == "tool_agent"
        extra = row["extra_info"]
        episode = {"env_id": row["env_id"], "task_id": row["task_id"], "seed": row["seed"],
                   "split": row["split"], "backend": "sqlite"}
        names = tool_names(json.loads(row["tools"]))
        assert names == ["execute_sql", "submit_answer", "commit"]
        assert extra["tool_selection"] == names  # verl 0.9 keeps only these of its configured tools
        assert extra["tools_kwargs"] == {name: {"create_kwargs": episode} for name in names}
        assert extra["interaction_kwargs"] == {"name": INTERACTION_NAME, **episode}
        # What a verl tool or interaction gets is enough to play the row's episode again.
        env = gym.make(episode["env_id"], backend=episode["backend"])
        try:
            observation, info = env.reset(seed=episode["seed"], options={"task_id": episode["task_id"]})
        finally:
            env.close()
        assert observation == row["prompt"][-1]["content"] and info["split"] == row["split"]


def test_the_agent_name_can_name_another_loop(tmp_path: Path) -> None:
    run = _run(tmp_path, "DB-v0", "sqlite", ("db-weather-03",))
    export_run(run, tmp_path / "a.jsonl", agent_name="agentunit_loop")
    assert [r["agent_name"] for r in _rows(tmp_path / "a.jsonl")] == ["agentunit_loop"]
    done = cli("export", str(run), "-o", str(tmp_path / "b.jsonl"), "--agent-name", "my_loop", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["agent_name"] for r in _rows(tmp_path / "b.jsonl")] == ["my_loop"]
