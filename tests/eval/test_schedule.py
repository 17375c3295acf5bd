"""The scheduler wrapper and the copies hosted in gymnasium vector envs, on the toy env:
assignments and aborts travel out of band, never inside an action."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import BackendTimeoutError
from agentunit_gym.eval.run.copies import VectorCopy, copy_maker, head_copy
from agentunit_gym.eval.run.schedule import Abort, Assignment, Packet, ScheduleEpisodes
from tests.core.toy import ToyBackend, ToyEnv
from tests.eval.slow_agent import StuckToy


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


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_a_copy_in_a_vector_env_runs_assigned_episodes_and_aborts(vector: str) -> None:
    copy = copy_maker(vector, ToyEnv, "AgentUnit/Toy-v0", 30.0)()  # type: ignore[arg-type]
    assert isinstance(copy, VectorCopy)
    try:
        copy.assign(Assignment("t2", 1, "a"))
        obs, info = copy.reset()
        assert obs == "Task: Say 7." and info["packet"].kind == "reset" and info["packet"].info["seed"] == 1
        obs, reward, terminated, truncated, info = copy.step("Act: answer(7)")
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert info["packet"].trace.score.success and info["packet"].trace.episode_id == "a"
        # The next episode, ended from outside: the abort travels by set_attr, the action stays "".
        copy.assign(Assignment("t1", 2, "b"))
        assert copy.reset()[0] == "Task: Say 42."
        _, reward, terminated, truncated, info = copy.abort_episode(Abort(FinishReason.TASK_LIMIT, "too slow"))
        trace = info["packet"].trace
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert trace.finish_reason is FinishReason.TASK_LIMIT and trace.finish_detail == "too slow"
        # No assignment idles the copy.
        copy.assign(None)
        assert copy.reset()[1]["packet"].kind == "idle"
    finally:
        copy.close()
        copy.close()  # idempotent


def test_the_probe_is_the_head_copy_except_in_its_own_process() -> None:
    probe = ToyEnv()
    head = head_copy("sync", probe, "AgentUnit/Toy-v0", 30.0)
    assert isinstance(head, VectorCopy) and head.vec.envs[0].unwrapped is probe  # type: ignore[union-attr]
    head.close()
    assert probe._closed
    probe = ToyEnv()
    head = head_copy(None, probe, "AgentUnit/Toy-v0", 30.0)
    assert isinstance(head, ScheduleEpisodes) and head.unwrapped is probe
    head.close()
    probe = ToyEnv()
    assert head_copy("async", probe, "AgentUnit/Toy-v0", 30.0) is None and probe._closed


def test_a_stuck_copy_in_its_own_process_times_out_and_is_terminated() -> None:
    StuckToy.release, StuckToy.returned = threading.Event(), threading.Event()
    copy = copy_maker("async", StuckToy, "AgentUnit/Toy-v0", 0.5)()
    assert isinstance(copy, VectorCopy) and isinstance(copy.vec, gym.vector.AsyncVectorEnv)
    process = copy.vec.processes[0]
    try:
        copy.assign(Assignment("t1", 1, "a"))
        copy.reset()
        with pytest.raises(BackendTimeoutError, match="0.5 s"):
            copy.step("Act: echo(hi)")  # StuckToy hangs in a step
    finally:
        copy.close()  # must not wait for the stuck step
    assert not process.is_alive()


class PidLoggingBackend(ToyBackend):
    """Logs the process it is started in."""

    def start(self) -> None:
        import os

        with open(os.environ["WARM_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")


class WarmCount(ToyEnv):
    """Counts, per process, the backends started by warm-up."""

    backend_class = PidLoggingBackend


def test_a_copy_in_its_own_process_starts_its_backend_there_only(tmp_path: Any, monkeypatch: Any) -> None:
    """AsyncVectorEnv makes one env in this process to read the spaces: that one must not start a
    backend (a sandbox, a container) only to close it, and its subprocesses raced the copies' forks."""
    import os

    monkeypatch.setenv("WARM_LOG", str(tmp_path / "warm.log"))
    copy = copy_maker("async", WarmCount, "AgentUnit/Toy-v0", 30.0)()
    assert isinstance(copy, VectorCopy) and isinstance(copy.vec, gym.vector.AsyncVectorEnv)
    try:
        copy.warm_up()
        pids = (tmp_path / "warm.log").read_text().split()
        assert pids == [str(copy.vec.processes[0].pid)] and str(os.getpid()) not in pids
    finally:
        copy.close()
