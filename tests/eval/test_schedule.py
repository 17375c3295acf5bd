"""The scheduler wrapper and the threaded vector env, on the toy env: assignments and aborts
travel out of band, never inside an action."""

from __future__ import annotations

import numpy as np
import pytest

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import EpisodeStateError
from agentunit_gym.eval.schedule import Abort, Assignment, Packet, ScheduleEpisodes
from agentunit_gym.eval.vector import ThreadedVectorEnv
from tests.core.toy import ToyEnv


def test_an_action_is_always_stepped_and_an_abort_is_a_field() -> None:
    env = ScheduleEpisodes(ToyEnv(), "AgentUnit/Toy-v0")
    env.assignment = Assignment(task_id="t1", seed=3, key="k1")
    _, info = env.reset()
    assert info["packet"].kind == "reset" and info["packet"].info["seed"] == 3
    # What the old runner read as an abort is now just the agent's (invalid) reply.
    _, _, terminated, truncated, info = env.step("\x00agentunit-abort:error:x")
    packet: Packet = info["packet"]
    assert (terminated, truncated, packet.kind) == (False, False, "step") and packet.info["action_error"]
    env.pending_abort = Abort(FinishReason.CONTEXT_LIMIT, "agent context limit: too long")
    _, _, terminated, truncated, info = env.step("Act: answer(42)")  # not run: the abort wins
    trace = info["packet"].trace
    assert truncated and trace is not None and trace.finish_reason is FinishReason.CONTEXT_LIMIT
    assert trace.episode_id == "k1" and len(trace.steps) == 1 and trace.metadata["trace_source"] == "runner"
    assert trace.finish_detail == "agent context limit: too long" and env.pending_abort is None
    env.close()


def test_threaded_vector_env_masked_reset_step_and_attributes() -> None:
    vec = ThreadedVectorEnv([lambda: ScheduleEpisodes(ToyEnv(), "AgentUnit/Toy-v0") for _ in range(3)])
    vec.set_attr("assignment", [Assignment("t2", 1, "a"), None, Assignment("t1", 2, "c")])
    obs, infos = vec.reset(seed=[1, None, 2])
    assert list(obs) == ["Task: Say 7.", "", "Task: Say 42."]
    assert [p.kind for p in infos["packet"]] == ["reset", "idle", "reset"] and infos["_packet"].all()
    _, rewards, terminated, truncated, infos = vec.step(("Act: answer(7)", "", "Act: echo(hi)"))
    assert rewards.tolist() == [1.0, 0.0, 0.0] and terminated.tolist() == [True, False, False]
    assert infos["packet"][0].trace.score.success
    with pytest.raises(EpisodeStateError, match="reset_mask"):
        vec.step(("", "", "Act: answer(42)"))
    vec.set_attr("assignment", None)
    vec.reset(options={"reset_mask": np.array([True, False, False])})
    _, rewards, terminated, _, _ = vec.step(("", "", "Act: answer(42)"))
    assert rewards.tolist() == [0.0, 0.0, 1.0] and terminated.tolist() == [False, False, True]
    assert vec.get_attr("env_id") == ("AgentUnit/Toy-v0",) * 3
    vec.close()
    assert all(env.unwrapped._closed for env in vec.envs)  # type: ignore[attr-defined]
