"""The runner on the toy env: copies in and out of vector envs, resume, retries, agent failures, deadlines."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from agentunit_gym.core.env import Execution
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import AgentContextLimitError, BackendError, ConfigError
from agentunit_gym.eval.agents.builtin import OracleAgent, resolve_agent
from agentunit_gym.eval.report.summary import load_episodes, summarize
from agentunit_gym.eval.run.runner import (
    EvalConfig,
    RunPaths,
    WorkItem,
    backend_for,
    episode_seed,
    plan,
    read_records,
    run_episodes,
)
from agentunit_gym.wrappers import TrapLibrary, make_eval_env
from tests.core.toy import ToyEnv
from tests.eval.slow_agent import StuckToy
from tests.wrappers.fakes import TOY_ADMIN_ID, register_toys
from tests.wrappers.test_traps import TOY_LIBRARY


def toy_factory(env_id: str, options: dict[str, Any]) -> ToyEnv:
    return ToyEnv()


def stack_factory(env_id: str, options: dict[str, Any]) -> gym.Env[str, str]:
    """The standard stack over the toy env with an admin channel, the toy-delete trap in every episode."""
    register_toys()
    library = TrapLibrary.model_validate({**TOY_LIBRARY, "traps": [TOY_LIBRARY["traps"][0]]})
    return make_eval_env(TOY_ADMIN_ID, traps=library, trap_rate=1.0, max_context_tokens=100_000,
                         max_seconds=options["max_seconds"])


FACTORIES = {"bare": toy_factory, "stack": stack_factory}


def run(tmp_path: Path, agent: Any = None, env_factory: Any = toy_factory, **cfg: Any) -> list[Any]:
    config = EvalConfig(envs=("Toy-v0",), **cfg)
    factory = agent or OracleAgent
    return run_episodes(config, factory, "a", tmp_path, env_factory=env_factory).records


def assert_trace_source(trace: EpisodeTrace, factory: str) -> None:
    """A stack with RecordTrace records the trace itself, trap verdict and context count included;
    only a bare env gets the runner's own trace."""
    if factory == "bare":
        assert trace.metadata["trace_source"] == "runner"
        return
    assert "trace_source" not in trace.metadata
    assert [(t.trap_id, t.verdict) for t in trace.traps] == [("toy-delete", "refused")]
    assert trace.context_tokens is not None and trace.context_tokens > 0
    assert trace.metadata["context_counter"] == "approx" and trace.metadata["loop_count"] == 0


@pytest.mark.parametrize("vector", ["sync", "threads", "async"])
def test_every_task_and_repeat_runs_once(tmp_path: Path, vector: str) -> None:
    records = run(tmp_path, runs=3, concurrency=2, vector=vector)
    keys = sorted(r.key for r in records)
    # t3 only runs on another backend: 2 tasks x 3 runs.
    assert keys == sorted(f"AgentUnit/Toy-v0|{t}|{r}" for t in ("t1", "t2") for r in range(3))
    assert all(r.success and r.status == "done" for r in records)
    assert {r.task_id: r.steps for r in records} == {"t1": 2, "t2": 1}
    # The seed depends on the episode only.
    for r in records:
        assert r.seed == episode_seed(0, "AgentUnit/Toy-v0", r.task_id, r.run)
    _, episodes = load_episodes(tmp_path)
    assert len(episodes) == 6 and all(e.trace.seed == episode_seed(0, e.trace.env_id or "", e.trace.task_id, e.run)
                                      for e in episodes)


def test_concurrency_wider_than_work_and_width_one(tmp_path: Path) -> None:
    assert len(run(tmp_path / "a", runs=1, concurrency=8)) == 2
    assert len(run(tmp_path / "b", runs=2, concurrency=1)) == 4


def test_plan_filters_sampling_and_errors() -> None:
    tasks = {"E": [(f"t{i}", "even" if i % 2 == 0 else "odd") for i in range(10)]}
    assert [w.task_id for w in plan(EvalConfig(task_ids=("t3", "t4")), tasks)] == ["t3", "t4"]
    assert {w.task_id for w in plan(EvalConfig(categories=("ODD",)), tasks)} == {"t1", "t3", "t5", "t7", "t9"}
    sampled = plan(EvalConfig(n=4, runs=2, seed=7), tasks)
    assert len(sampled) == 8 and sampled == plan(EvalConfig(n=4, runs=2, seed=7), tasks)  # seeded
    assert {w.task_id for w in sampled if w.run == 0} == {w.task_id for w in sampled if w.run == 1}
    assert {w.task_id for w in plan(EvalConfig(n=4, seed=8), tasks)} != {w.task_id for w in sampled} or True
    with pytest.raises(ConfigError, match="t99"):
        plan(EvalConfig(task_ids=("t99",)), tasks)
    with pytest.raises(ConfigError, match="no task"):
        plan(EvalConfig(categories=("none",)), tasks)


def test_backend_per_env_kind() -> None:
    assert backend_for("AgentUnit/OS-v0", ["sqlite", "local"]) == "local"
    assert backend_for("AgentUnit/DB-v0", ["sqlite", "local"]) == "sqlite"
    assert backend_for("AgentUnit/DB-v0", ["docker"]) == "auto"
    with pytest.raises(ConfigError, match="unknown backend"):
        backend_for("AgentUnit/OS-v0", ["podman"])


def test_resume_runs_only_missing_and_refuses_other_settings(tmp_path: Path) -> None:
    records = run(tmp_path, runs=2)
    assert len(records) == 4
    # Drop the last two lines, as if the run had been killed, plus a torn line.
    lines = RunPaths(tmp_path).episodes.read_text().splitlines()
    RunPaths(tmp_path).episodes.write_text("\n".join(lines[:2]) + "\n{\"key\": \"torn")
    missing = {r.key for r in records} - {r.key for r in read_records(RunPaths(tmp_path).episodes)}
    config = EvalConfig(envs=("Toy-v0",), runs=2)
    out = run_episodes(config, OracleAgent, "a", tmp_path, env_factory=toy_factory, resume=True)
    assert {r.key for r in out.records} == missing and out.skipped == 2
    assert len(read_records(RunPaths(tmp_path).episodes)) == 4
    with pytest.raises(ConfigError, match="--resume"):
        run_episodes(config, OracleAgent, "a", tmp_path, env_factory=toy_factory)
    with pytest.raises(ConfigError, match="runs"):
        run_episodes(EvalConfig(envs=("Toy-v0",), runs=3), OracleAgent, "a", tmp_path,
                     env_factory=toy_factory, resume=True)


class FlakyToy(ToyEnv):
    """Fails at reset the first ``fail`` times in this process."""

    failures = {"left": 0}

    def _start_episode(self, task: Any) -> str:
        if FlakyToy.failures["left"] > 0:
            FlakyToy.failures["left"] -= 1
            raise BackendError("container died (scripted)")
        return super()._start_episode(task)


class StepFlakyToy(ToyEnv):
    failures = {"left": 0}

    def _execute(self, action: Any) -> Execution:
        if StepFlakyToy.failures["left"] > 0:
            StepFlakyToy.failures["left"] -= 1
            raise BackendError("connection dropped (scripted)")
        return super()._execute(action)


def test_infra_errors_are_retried_then_recorded(tmp_path: Path) -> None:
    FlakyToy.failures["left"] = 2
    config = EvalConfig(envs=("Toy-v0",), task_ids=("t2",), max_infra_retries=2, vector="sync")
    records = run_episodes(config, OracleAgent, "a", tmp_path / "ok", env_factory=lambda e, o: FlakyToy()).records
    assert [(r.status, r.attempts, r.success) for r in records] == [("done", 3, True)]
    # A failure in a step (t1's first action runs in the backend) is retried as well.
    StepFlakyToy.failures["left"] = 1
    config = EvalConfig(envs=("Toy-v0",), task_ids=("t1",), vector="sync")
    records = run_episodes(config, OracleAgent, "a", tmp_path / "step", env_factory=lambda e, o: StepFlakyToy()).records
    assert [(r.status, r.attempts, r.success) for r in records] == [("done", 2, True)]
    FlakyToy.failures["left"] = 10
    config = EvalConfig(envs=("Toy-v0",), task_ids=("t2",), max_infra_retries=1, vector="sync")
    records = run_episodes(config, OracleAgent, "a", tmp_path / "bad", env_factory=lambda e, o: FlakyToy()).records
    assert [(r.status, r.attempts) for r in records] == [("infra_error", 2)]
    assert "container died" in records[0].error
    FlakyToy.failures["left"] = 0


class BrokenAgent:
    calls = {"n": 0}

    def act(self, observation: str, info: dict[str, Any]) -> str:
        BrokenAgent.calls["n"] += 1
        raise RuntimeError("model crashed")


def test_agent_failures_are_recorded_and_never_retried(tmp_path: Path) -> None:
    BrokenAgent.calls["n"] = 0
    records = run(tmp_path, agent=BrokenAgent, task_ids=("t1",), max_infra_retries=3)
    assert [(r.status, r.attempts, r.finish_reason, r.success) for r in records] == [
        ("agent_error", 1, "error", False)]
    assert "model crashed" in records[0].error
    assert BrokenAgent.calls["n"] == 1
    summary = summarize(tmp_path)
    assert summary["overall"]["metrics"]["finish_error_rate"]["value"] == 1.0


class OverflowingAgent(OracleAgent):
    """The oracle, whose model runs out of context at ``when``: its reset, or its second turn."""

    when = "act"

    def reset(self, info: dict[str, Any]) -> None:
        super().reset(info)
        self.turns = 0
        if self.when == "reset":
            raise AgentContextLimitError("toy-model", "maximum context length is 8 tokens", 400)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.turns += 1
        if self.turns == 2:
            raise AgentContextLimitError("toy-model", "maximum context length is 8 tokens", 400)
        return super().act(observation, info)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize(("when", "steps"), [("act", 1), ("reset", 0)])
def test_an_agent_out_of_context_ends_its_episode_as_cle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         when: str, steps: int, factory: str) -> None:
    monkeypatch.setattr(OverflowingAgent, "when", when)
    records = run(tmp_path, agent=OverflowingAgent, env_factory=FACTORIES[factory], task_ids=("t1",),
                  max_infra_retries=3)
    # Not an agent error and not retried: the episode ended, as CLE.
    assert [(r.status, r.attempts, r.finish_reason, r.success, r.steps, r.error) for r in records] == [
        ("done", 1, "context_limit", False, steps, "")]
    _, episodes = load_episodes(tmp_path)
    trace = episodes[0].trace
    assert trace.finish_reason is FinishReason.CONTEXT_LIMIT and len(trace.steps) == steps
    assert "'toy-model'" in trace.finish_detail and "maximum context length" in trace.finish_detail
    assert_trace_source(trace, factory)
    metrics = summarize(tmp_path)["overall"]["metrics"]
    assert metrics["finish_cle_rate"]["value"] == 1.0 and metrics["finish_error_rate"]["value"] == 0.0


class HungAgent:
    """An agent whose reply never comes until the test releases it (at most 60 s)."""

    release = threading.Event()
    returned = threading.Event()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        # This episode's events: a reply released by an earlier test must not mark a later one.
        release, returned = HungAgent.release, HungAgent.returned
        release.wait(60)
        returned.set()
        return "Act: answer(42)"


@pytest.mark.parametrize("factory", FACTORIES)
def test_episode_wall_clock_limit_ends_a_hung_agent_as_tle(tmp_path: Path, factory: str) -> None:
    HungAgent.release, HungAgent.returned = threading.Event(), threading.Event()
    try:
        records = run(tmp_path, agent=HungAgent, env_factory=FACTORIES[factory], task_ids=("t1",),
                      episode_timeout_s=1.0)
        # The run ended the episode while the agent was still replying: no wall-clock bound needed.
        assert not HungAgent.returned.is_set()
    finally:
        HungAgent.release.set()
    assert [(r.status, r.finish_reason, r.success) for r in records] == [("done", "task_limit", False)]
    trace = load_episodes(tmp_path)[1][0].trace
    assert trace.finish_reason is FinishReason.TASK_LIMIT and "while the agent was replying" in trace.finish_detail
    assert_trace_source(trace, factory)


def test_summary_and_metrics_from_a_run(tmp_path: Path) -> None:
    label, factory = resolve_agent("random")
    config = EvalConfig(envs=("Toy-v0",), runs=3, agent="random", seed=3)
    run_episodes(config, factory, label, tmp_path, env_factory=toy_factory)
    summary = summarize(tmp_path)
    metrics = summary["overall"]["metrics"]
    assert summary["episodes"] == 6 and summary["config"]["agent"] == "random"
    assert metrics["pass@3"]["value"] is not None and "pass^3" in metrics
    assert set(summary["seeds"]["episodes"]) == {f"AgentUnit/Toy-v0|{t}|{r}" for t in ("t1", "t2") for r in range(3)}
    # Rerunning the same seeded run gives the same episodes.
    run_episodes(config, factory, label, tmp_path / "again", env_factory=toy_factory)
    first = {r.key: (r.steps, r.reward) for r in read_records(RunPaths(tmp_path).episodes)}
    second = {r.key: (r.steps, r.reward) for r in read_records(RunPaths(tmp_path / "again").episodes)}
    assert first == second


def test_workitem_key() -> None:
    assert WorkItem("E", "t", 2, 5).key == "E|t|2"


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_a_stuck_backend_step_has_a_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vector: str) -> None:
    from agentunit_gym.errors import BackendTimeoutError
    from agentunit_gym.eval.run import deadlines

    monkeypatch.setattr(deadlines, "STEP_GRACE_S", 0.2)
    config = EvalConfig(envs=("Toy-v0",), task_ids=("t1",), episode_timeout_s=1.0, vector=vector)  # type: ignore[arg-type]
    StuckToy.release, StuckToy.returned = threading.Event(), threading.Event()
    try:
        with pytest.raises(BackendTimeoutError, match="stuck"):
            run_episodes(config, OracleAgent, "a", tmp_path, env_factory=lambda e, o: StuckToy())
        # The run gave up on the backend while its step was still hanging.
        assert not StuckToy.returned.is_set()
    finally:
        StuckToy.release.set()


class CountedToy(ToyEnv):
    made: list[CountedToy] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        CountedToy.made.append(self)


@pytest.mark.parametrize("vector", ["sync", "threads"])
def test_the_env_that_lists_the_tasks_runs_them_and_every_env_is_closed(tmp_path: Path, vector: str) -> None:
    CountedToy.made = []
    config = EvalConfig(envs=("Toy-v0",), runs=2, concurrency=2, vector=vector)  # type: ignore[arg-type]
    records = run_episodes(config, OracleAgent, "a", tmp_path, env_factory=lambda e, o: CountedToy()).records
    assert len(records) == 4
    # One env per concurrent slot, the probe among them (its construction is not paid twice).
    assert len(CountedToy.made) == 2 and all(env.task is not None and env._closed for env in CountedToy.made)
    # A resume with nothing left to do closes the probe without making a vector env.
    CountedToy.made = []
    assert run_episodes(config, OracleAgent, "a", tmp_path, env_factory=lambda e, o: CountedToy(),
                        resume=True).records == []
    assert len(CountedToy.made) == 1 and CountedToy.made[0]._closed


def test_a_run_warns_when_its_backend_leaves_tasks_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="agentunit_gym"):
        records = run(tmp_path)
    assert {r.task_id for r in records} == {"t1", "t2"}
    notes = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    backend = ToyEnv().backend_name
    assert notes == [f"AgentUnit/Toy-v0: 1 other-only task left out on backend {backend}: "
                     "use --backend other for the full suite"]


def test_left_out_tasks_are_listed_with_the_reason_and_the_filters_apply(tmp_path: Path) -> None:
    from agentunit_gym.eval.plan.routing import network_options
    from agentunit_gym.tasks.spec import NEEDS_NETWORK
    from tests.core.toy import TOY_TASKS, ToyTask

    online = ToyTask(id="t4", instruction="Fetch it.", answer="1", category="web", needs_network=True,
                     network_note="downloads", reference_solution=({"answer": "1"},))  # type: ignore[arg-type]

    def factory(env_id: str, options: dict[str, Any]) -> ToyEnv:
        return ToyEnv(tasks=[*TOY_TASKS, online])

    # The toy domain has no network option: --network does not reach its env, so t4 stays out.
    assert network_options("AgentUnit/Toy-v0", True) == {}
    assert network_options("AgentUnit/OS-v0", True) == {"network": True}
    assert network_options("AgentUnit/OS-v0", False) == {}
    config = EvalConfig(envs=("Toy-v0",), network=True)
    outcome = run_episodes(config, OracleAgent, "a", tmp_path / "all", env_factory=factory)
    assert sorted(r.task_id for r in outcome.records) == ["t1", "t2"]
    backend = ToyEnv().backend_name
    expected = [{"env": "AgentUnit/Toy-v0", "task": "t3", "reason": f"not run on {backend}: runs only on other"},
                {"env": "AgentUnit/Toy-v0", "task": "t4", "reason": f"{NEEDS_NETWORK}: downloads"}]
    assert [lo.to_json() for lo in outcome.left_out] == expected
    assert json.loads(RunPaths(tmp_path / "all").left_out.read_text()) == expected
    assert summarize(tmp_path / "all")["left_out"] == expected
    # A category filter keeps only the left-out tasks it would have kept; asking for a left-out
    # task by id is not an unknown id, and a plan of nothing but left-out tasks is empty.
    only_web = EvalConfig(envs=("Toy-v0",), categories=("web",))
    outcome = run_episodes(only_web, OracleAgent, "a", tmp_path / "web", env_factory=factory)
    assert outcome.records == [] and [lo.task_id for lo in outcome.left_out] == ["t4"]
    assert plan(EvalConfig(envs=("Toy-v0",), task_ids=("t4",)), {"AgentUnit/Toy-v0": [("t1", "general")]},
                outcome.left_out) == []
    with pytest.raises(ConfigError, match="no env of this run has the task ids"):
        plan(EvalConfig(envs=("Toy-v0",), task_ids=("t9",)), {"AgentUnit/Toy-v0": [("t1", "general")]},
             outcome.left_out)


def test_the_left_out_note_counts_backend_and_network_tasks() -> None:
    from agentunit_gym.tasks.spec import TaskSpec, left_out_note

    suite = [TaskSpec(id="a", instruction="x"), TaskSpec(id="b", instruction="x", backends=("docker",)),
             TaskSpec(id="c", instruction="x", needs_network=True),
             TaskSpec(id="d", instruction="x", needs_network=True, backends=("docker",))]
    assert left_out_note(suite, "local", needs_docker={"docker"}, network=False) == (
        "2 docker-only tasks left out on backend local: start Docker (or pass --backend docker) for the full "
        "suite; 1 task that needs the network left out: pass --network to run it")
    assert left_out_note(suite, "docker", network=False) == (
        "2 tasks that need the network left out: pass --network to run them")
    assert left_out_note(suite, "docker", network=True) is None
