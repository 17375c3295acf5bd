from __future__ import annotations

import json
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from agentunit_gym.core import FinishReason
from agentunit_gym.errors import ConfigError, EpisodeStateError, TaskNotFoundError
from agentunit_gym.tasks.spec import TaskSpec

from .toy import TOY_TASKS, ToyEnv, ToyTask


def test_check_env_passes() -> None:
    check_env(ToyEnv(), skip_render_check=True)


def test_commit_scores_and_terminates() -> None:
    env = ToyEnv()
    obs, info = env.reset(options={"task_id": "t1"})
    assert obs == "Task: Say 42."
    assert info["task_id"] == "t1" and info["max_steps"] == 4 and info["optimal_steps"] == 2
    assert [t["function"]["name"] for t in info["tools"]] == ["echo", "answer"]
    obs, reward, term, trunc, info = env.step("Think: easy\nAct: echo(hello)")
    assert (obs, reward, term, trunc) == ("hello", 0.0, False, False)
    assert info["finish_reason"] == "" and info["execution"] == {"length": 5}
    obs, reward, term, trunc, info = env.step("Act: answer(42)")
    assert (reward, term, trunc) == (1.0, True, False)
    assert info["finish_reason"] is FinishReason.COMPLETE and info["score"]["success"] is True
    with pytest.raises(EpisodeStateError):
        env.step("Act: echo(x)")


def test_json_tool_call_and_classification() -> None:
    env = ToyEnv()
    env.reset(options={"task_id": "t2"})
    _, _, _, _, info = env.step('{"name": "answr", "arguments": {"text": "7"}}')
    assert info["action_error"]["issue"] == "unknown_tool"
    assert info["action_error"]["reason"] == "invalid_action"
    assert "answer" in info["action_error"]["hint"]
    _, _, _, _, info = env.step('{"name": "answer", "arguments": {}}')
    assert info["action_error"]["issue"] == "missing_parameter"
    _, reward, term, _, info = env.step(json.dumps({"name": "answer", "arguments": {"text": "7"}}))
    assert term and reward == 1.0 and info["action"]["form"] == "json"


def test_step_limit_is_tle_and_truncates() -> None:
    env = ToyEnv(max_steps=2)
    env.reset(options={"task_id": "t1"})
    env.step("nonsense")
    obs, reward, term, trunc, info = env.step("more nonsense")
    assert trunc and not term and reward == 0.0
    assert info["finish_reason"] is FinishReason.TASK_LIMIT
    assert info["action_error"]["reason"] == "invalid_format"


def test_terminate_policy_ends_on_invalid() -> None:
    env = ToyEnv(invalid_action="terminate")
    env.reset(options={"task_id": "t1"})
    obs, reward, term, trunc, info = env.step("Act: launch(rockets)")
    assert term and info["finish_reason"] is FinishReason.INVALID_ACTION
    assert (reward, trunc) == (0.0, False) and obs == "Invalid action: unknown tool 'launch'."
    assert info["score"]["success"] is False and info["finish_detail"] == "unknown tool 'launch'."
    assert env.finish_reason is FinishReason.INVALID_ACTION
    with pytest.raises(EpisodeStateError, match="episode ended"):
        env.step("Act: answer(42)")


def test_task_selection_errors_and_seeding() -> None:
    env = ToyEnv()
    with pytest.raises(TaskNotFoundError):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(ConfigError):
        env.reset(options={"task_id": "t3"})  # other backend only
    assert [t.id for t in env.tasks] == ["t1", "t2"]
    picks = [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    again = [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert picks == again and set(picks) == {"t1", "t2"}  # seeds pick among the supported tasks only


def test_close_is_idempotent_and_releases() -> None:
    env = ToyEnv()
    env.reset(options={"task_id": "t1"})
    env.close()
    env.close()
    assert env.closed_backend == 1 and env.released == 1
    with pytest.raises(EpisodeStateError):
        env.reset()


def test_render_action_both_forms() -> None:
    env = ToyEnv()
    env.reset(options={"task_id": "t1"})
    steps = env.task.reference_solution  # type: ignore[union-attr]
    assert env.render_action(steps[0]) == "Act: echo(hi)"
    assert json.loads(env.render_action(steps[1], form="json")) == {"name": "answer", "arguments": {"text": "42"}}


def test_async_vector_env_needs_no_shared_memory() -> None:
    import gymnasium as gym

    with pytest.raises(ValueError, match="shared_memory=False"):
        gym.vector.AsyncVectorEnv([ToyEnv, ToyEnv])
    envs = gym.vector.AsyncVectorEnv([ToyEnv, ToyEnv], shared_memory=False)
    try:
        long_task = {"id": "long", "instruction": "x" * 500, "answer": "1"}
        obs, _ = envs.reset(seed=0, options={"task": long_task})
        assert [len(o) for o in obs] == [len("Task: ") + 500] * 2
    finally:
        envs.close()


def test_step_out_of_order_raises() -> None:
    env = ToyEnv()
    with pytest.raises(EpisodeStateError, match="before reset"):
        env.step("Act: echo(x)")
    env.close()
    with pytest.raises(EpisodeStateError, match="after close"):
        env.step("Act: echo(x)")


@pytest.mark.parametrize("kwargs", [{"invalid_action": "explode"}, {"render_mode": "human"}, {"max_steps": 0}])
def test_bad_options_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        ToyEnv(**kwargs)


def test_end_episode_from_outside() -> None:
    env = ToyEnv()
    with pytest.raises(EpisodeStateError):
        env.end_episode(FinishReason.TASK_LIMIT)
    env.reset(options={"task_id": "t1"})
    with pytest.raises(ConfigError, match="committing action"):
        env.end_episode(FinishReason.COMPLETE)
    ended = env.end_episode(FinishReason.TASK_LIMIT, detail="wrapper limit")
    assert ended["finish_reason"] is FinishReason.TASK_LIMIT and ended["finish_detail"] == "wrapper limit"
    assert ended["score"]["reward"] == 0.0 and ended["score"]["success"] is False
    assert env.finish_reason is FinishReason.TASK_LIMIT and env.released == 1
    with pytest.raises(EpisodeStateError):
        env.end_episode(FinishReason.TASK_LIMIT)


def test_render_shows_the_last_observation_in_ansi_mode() -> None:
    env = ToyEnv(render_mode="ansi")
    prompt, _ = env.reset(options={"task_id": "t1"})
    assert env.render() == prompt
    env.step("Act: echo(hello)")
    assert env.render() == "hello"
    quiet = ToyEnv()
    quiet.reset(options={"task_id": "t1"})
    assert quiet.render() is None


def test_ad_hoc_task_is_coerced_to_the_task_model() -> None:
    env = ToyEnv()
    obs, info = env.reset(options={"task": {"id": "adhoc", "instruction": "Say 5.", "answer": "5"}})
    assert obs == "Task: Say 5." and info["task_id"] == "adhoc"
    assert isinstance(env.task, ToyTask) and env.task.answer == "5"
    assert env.step("Act: answer(5)")[1] == 1.0
    # A base TaskSpec becomes the env's model too (fields it lacks take their defaults).
    env.reset(options={"task": TaskSpec(id="plain", instruction="Say 42.")})
    assert isinstance(env.task, ToyTask) and env.task.answer == "42"


def test_tasks_from_files_and_folders(tmp_path: Path) -> None:
    folder = tmp_path
    (folder / "a.yaml").write_text("- {id: fa, instruction: Say 1., answer: '1'}\n", encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.json").write_text('{"tasks": [{"id": "fb", "instruction": "Say 2.", "answer": "2"}]}',
                                           encoding="utf-8")
    for source in (folder, str(folder), [folder / "a.yaml", str(folder / "sub" / "b.json")]):
        env = ToyEnv(tasks=source)
        assert [(t.id, t.answer, type(t).__name__) for t in env.tasks] == [("fa", "1", "ToyTask"),
                                                                             ("fb", "2", "ToyTask")]


def test_mixed_task_sources_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mixes task specs and task files"):
        ToyEnv(tasks=[TOY_TASKS[0], str(tmp_path)])  # type: ignore[list-item]
