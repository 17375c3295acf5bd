"""The episode engine (asynchronous episodes, the one schedule): no barrier between episodes,
async and sync agents, deadlines; and the shared rate gate of a model endpoint."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.errors import BackendError, BackendTimeoutError, ConfigError, EpisodeStateError
from agentunit_gym.eval.agents.builtin import OracleAgent
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.openai_agent import OpenAIChatAgent, OpenAIConfig
from agentunit_gym.eval.agents.ratelimit import RateGate, endpoint_gate
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.records import EpisodeRecord, RecordWriter, RunPaths, read_records
from agentunit_gym.eval.run.runner import run_episodes
from agentunit_gym.eval.run.slots import RecordSink
from tests.core.toy import ToyBackend, ToyEnv
from tests.eval.slow_agent import StuckToy


class WaitingOracle(OracleAgent):
    """The oracle, whose t1 episodes ("Say 42.") wait until two t2 episodes have been recorded:
    under a per-turn barrier the t2 episodes could not finish while a t1 reply is pending."""

    released: asyncio.Event | None = None
    """Made on the scheduler's event loop by the first reply."""

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self.task = str(info.get("task_id"))

    async def act(self, observation: str, info: dict[str, Any]) -> str:  # type: ignore[override]
        if WaitingOracle.released is None:
            WaitingOracle.released = asyncio.Event()
        if self.task == "t1":
            await asyncio.wait_for(WaitingOracle.released.wait(), timeout=5.0)
        return OracleAgent.act(self, observation, info)


@pytest.mark.parametrize("vector", [None, "sync", "async"])
def test_an_episode_waiting_on_its_agent_holds_up_no_other(tmp_path: Path, vector: str | None) -> None:
    """Wherever the copies live (``--vector`` used to mean a per-turn barrier)."""
    finished: list[str] = []

    def progress(record: EpisodeRecord, done: int, total: int) -> None:
        finished.append(record.task_id)
        if finished.count("t2") == 2 and WaitingOracle.released is not None:
            WaitingOracle.released.set()  # progress runs on the scheduler's loop

    WaitingOracle.released = None
    # The queue: t1 r0, t2 r0, t1 r1, t2 r1 on three copies; both t2 episodes end while both t1 wait.
    config = EvalConfig(envs=("Toy-v0",), runs=2, concurrency=3, vector=vector)  # type: ignore[arg-type]
    records = run_episodes(config, WaitingOracle, "a", tmp_path, env_factory=lambda e, o: ToyEnv(),
                           progress=progress).records
    assert finished == ["t2", "t2", "t1", "t1"]
    assert len(records) == 4 and all(r.success and r.status == "done" for r in records)


class AsyncOracle(OracleAgent):
    async def act(self, observation: str, info: dict[str, Any]) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return OracleAgent.act(self, observation, info)


@pytest.mark.parametrize("vector", [None, "threads", "sync", "async"])
def test_async_agents_run_wherever_the_copies_live(tmp_path: Path, vector: str | None) -> None:
    config = EvalConfig(envs=("Toy-v0",), runs=2, concurrency=2, vector=vector)  # type: ignore[arg-type]
    records = run_episodes(config, AsyncOracle, "a", tmp_path, env_factory=lambda e, o: ToyEnv()).records
    assert sorted((r.task_id, r.run, r.success, r.steps) for r in records) == [
        ("t1", 0, True, 2), ("t1", 1, True, 2), ("t2", 0, True, 1), ("t2", 1, True, 1)]


def test_a_stuck_backend_call_has_a_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentunit_gym.eval.run import deadlines

    monkeypatch.setattr(deadlines, "STEP_GRACE_S", 0.2)
    # An episode budget that a loaded machine still reaches the first step within.
    config = EvalConfig(envs=("Toy-v0",), task_ids=("t1",), episode_timeout_s=1.0)
    StuckToy.release, StuckToy.returned = threading.Event(), threading.Event()
    try:
        with pytest.raises(BackendTimeoutError, match="stuck"):
            run_episodes(config, OracleAgent, "a", tmp_path, env_factory=lambda e, o: StuckToy())
        # The run gave up on the backend while its step was still hanging.
        assert not StuckToy.returned.is_set()
    finally:
        StuckToy.release.set()


def test_an_interrupt_as_an_env_call_completes_is_not_dropped(tmp_path: Path) -> None:
    """Ctrl-C cancels the episode loop. When the cancel lands just as an env call returns, the
    loop must still stop (asyncio.wait_for on Python 3.11 returned the call's result instead, and
    the run went on to its end)."""
    from agentunit_gym.eval.run.engine import EpisodeEngine

    config = EvalConfig(envs=("Toy-v0",), task_ids=("t1",))
    engine = EpisodeEngine(config, OracleAgent, "a", width=1)
    after: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        assert me is not None

        def call() -> str:
            # The cancel is queued on the loop before the call's result is.
            loop.call_soon_threadsafe(me.cancel)
            return "done"

        await engine._env(call)
        after.append("went on")

    try:
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(main())
    finally:
        engine.close([])
    assert after == []


class WarmToyBackend(ToyBackend):
    def start(self) -> None:
        if WarmToy.fail:
            raise BackendError("the daemon is away")
        WarmToy.log.append("warm")


class WarmToy(ToyEnv):
    """Records when its backend was started: ahead of the run, or by a reset."""

    log: list[str] = []
    fail = False
    backend_class = WarmToyBackend

    def _start_episode(self, task: Any) -> str:
        WarmToy.log.append("episode")
        return super()._start_episode(task)


@pytest.mark.parametrize("fail", [False, True], ids=["warmed", "warm-up-fails"])
def test_every_copy_is_warmed_before_the_first_episode(tmp_path: Path, fail: bool) -> None:
    WarmToy.log, WarmToy.fail = [], fail
    config = EvalConfig(envs=("Toy-v0",), runs=2, concurrency=3)
    records = run_episodes(config, OracleAgent, "a", tmp_path, env_factory=lambda e, o: WarmToy()).records
    # A failed warm-up is left for the episode's own reset; the run goes on.
    assert len(records) == 4 and all(r.success for r in records)
    expected = [] if fail else ["warm"] * 3
    assert WarmToy.log[:len(expected)] == expected and WarmToy.log.count("episode") == 4
    assert WarmToy.log.count("warm") == len(expected)


def test_warm_up_on_a_closed_env_is_refused() -> None:
    env = ToyEnv()
    env.close()
    with pytest.raises(EpisodeStateError, match="closed"):
        env.warm_up()


# ------------------------------------------------------------------- the rate gate


def test_rate_gate_spaces_requests_and_a_pause_holds_them_all() -> None:
    gate = RateGate(max_rps=0.01)
    waits = [gate.reserve() for _ in range(5)]
    # Slots 100 s apart, taken at once: the waits grow by 100 s, less the time between the calls
    # (under a second however loaded the machine; nothing waits for them).
    assert waits == [0.0, *(pytest.approx(100.0 * i, abs=1.0) for i in range(1, 5))]
    gate = RateGate()
    assert gate.reserve() == 0.0 and gate.max_rps is None
    gate.pause(300)
    assert gate.reserve() == pytest.approx(300, abs=1.0) and gate.paused_for() == pytest.approx(300, abs=1.0)
    with pytest.raises(ConfigError, match="positive"):
        RateGate(max_rps=0)


def test_rate_gate_acquire_waits_out_a_pause_set_while_waiting() -> None:
    gate = RateGate(max_rps=10.0)

    async def two() -> float:
        await gate.acquire()  # free at once
        gate.pause(0.25)      # as a 429 seen by another episode would
        started = time.monotonic()
        await gate.acquire()
        return time.monotonic() - started

    assert asyncio.run(two()) >= 0.24


def test_one_gate_per_endpoint() -> None:
    a = endpoint_gate("http://127.0.0.1:1/v1/", max_rps=5.0)
    assert endpoint_gate("http://127.0.0.1:1/v1") is a and a.max_rps == pytest.approx(5.0)
    assert endpoint_gate("http://127.0.0.1:2/v1") is not a


def test_a_429_retry_after_holds_every_episode_and_max_rps_caps_the_rate() -> None:
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}, failures=[429],
                        retry_after="2") as server:
        config = OpenAIConfig(model="m", base_url=server.base_url, backoff_s=0.01)
        agents = [OpenAIChatAgent(config) for _ in range(4)]
        for agent in agents:
            agent.reset({})

        async def turns() -> list[str]:
            first = asyncio.ensure_future(agents[0].act("hi", {}))
            deadline = time.monotonic() + 10.0
            gate = endpoint_gate(server.base_url)
            while not gate.paused_for() and time.monotonic() < deadline:  # the 429 received: the gate paused
                await asyncio.sleep(0.01)
            assert gate.paused_for(), "the 429 did not pause the endpoint's gate"
            # The others start during the pause.
            rest = [agents[i].act("hi", {}) for i in range(1, 4)]
            return [str(r) for r in await asyncio.gather(first, *rest)]

        assert asyncio.run(turns()) == ["ok"] * 4
        assert server.statuses == [429, 200, 200, 200, 200]
        # No request reached the server during the 2 s the 429 asked for, from any agent (2 s, so
        # that a loaded machine still sees the pause before it is over).
        assert min(server.arrivals[1:]) - server.arrivals[0] >= 1.95
    with FakeChatServer(lambda body: {"role": "assistant", "content": "ok"}) as server:
        agents = [OpenAIChatAgent(OpenAIConfig(model="m", base_url=server.base_url, max_rps=10.0)) for _ in range(6)]
        for agent in agents:
            agent.reset({})

        async def burst() -> None:
            await asyncio.gather(*(a.act("hi", {}) for a in agents))

        asyncio.run(burst())
        gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
        assert len(server.arrivals) == 6 and sum(gaps) >= 0.45  # six requests at 10/s span 0.5 s


def _record(key: str) -> EpisodeRecord:
    return EpisodeRecord(key=key, env_id="AgentUnit/Toy-v0", task_id=key, run=0, seed=1, agent="oracle",
                         status="done", attempts=1)


class _GatedWriter(RecordWriter):
    """A writer whose writes wait for ``gate``: the event loop must not."""

    def __init__(self, paths: RunPaths) -> None:
        super().__init__(paths)
        self.gate = threading.Event()
        self.threads: set[str] = set()

    def write(self, record: EpisodeRecord, trace: Any) -> EpisodeRecord:
        assert self.gate.wait(10)
        self.threads.add(threading.current_thread().name)
        return super().write(record, trace)


def test_a_finished_episode_is_written_off_the_loop_and_never_lost_to_a_cancel(tmp_path: Path) -> None:
    writer = _GatedWriter(RunPaths(tmp_path))
    sink = RecordSink(writer, done=0, total=3, progress=None)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="records")
    ticks: list[int] = []

    async def main() -> None:
        first = asyncio.create_task(sink.record_off_loop(_record("a"), None, pool))
        second = asyncio.create_task(sink.record_off_loop(_record("b"), None, pool))
        for i in range(5):  # the loop runs while both writes wait in the records thread
            await asyncio.sleep(0.01)
            ticks.append(i)
        second.cancel()  # an interrupt while "b" is still queued behind "a"
        writer.gate.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second

    asyncio.run(main())
    pool.shutdown(wait=True)
    writer.close()
    assert ticks == [0, 1, 2, 3, 4]
    assert writer.threads == {"records_0"}
    # Both are in the file, in the order they were handed over; only the awaited one is counted.
    assert [r.key for r in read_records(RunPaths(tmp_path).episodes)] == ["a", "b"]
    assert [r.key for r in sink.written] == ["a"] and sink.done == 1


def test_the_loop_and_the_records_thread_never_interleave_lines(tmp_path: Path) -> None:
    writer = RecordWriter(RunPaths(tmp_path))
    big = "x" * 20000  # lines longer than any buffer: torn if two writers ran at once
    records = [_record(f"{i}-{big}") for i in range(200)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda r: writer.write(r, None), records))
    writer.close()
    assert sorted(r.key for r in read_records(RunPaths(tmp_path).episodes)) == sorted(r.key for r in records)
