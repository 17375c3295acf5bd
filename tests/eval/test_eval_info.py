"""The evaluator's keys in ``info`` (eval/agents/info.py): written on every reset and step of a real
eval on each registered domain's embedded backend, each key of its declared type, and read by
the agents, which refuse a value of the wrong type."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_type_hints

import numpy as np
import pytest

from agentunit_gym.core import registry
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import ConfigError, EpisodeStateError
from agentunit_gym.eval.agents.builtin import OracleAgent, RandomAgent
from agentunit_gym.eval.agents.info import REFERENCE_KEY, EvalResetInfo, EvalStepInfo, reference_actions, reset_seed
from agentunit_gym.eval.plan.work import list_tasks
from agentunit_gym.eval.run.runner import EvalConfig, run_episodes
from agentunit_gym.eval.run.schedule import Abort, Assignment, Packet, ScheduleEpisodes
from agentunit_gym.wrappers import make_eval_env
from tests.core.toy import ToyEnv
from tests.infokit import mismatches

EMBEDDED = [(env_id, domain.embedded_backend.name) for domain in registry.domains() for env_id in domain.env_ids]
"""Every registered env id with its domain's embedded backend (no daemon)."""

STEP_KEYS = set(get_type_hints(EvalStepInfo))


def test_every_registered_domain_is_covered() -> None:
    assert {"AgentUnit/DB-v0", "AgentUnit/KG-v0", "AgentUnit/OS-v0", "AgentUnit/WebShop-v0"} <= {e for e, _ in EMBEDDED}


class RecordingOracle(OracleAgent):
    """The oracle, keeping a copy of every ``info`` the evaluator hands it."""

    def __init__(self, resets: list[dict[str, Any]], acts: list[dict[str, Any]]) -> None:
        super().__init__()
        self.resets, self.acts = resets, acts

    def reset(self, info: dict[str, Any]) -> None:
        self.resets.append(dict(info))
        super().reset(info)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self.acts.append(dict(info))
        return super().act(observation, info)


@pytest.mark.parametrize(("env_id", "backend"), EMBEDDED)
def test_an_eval_hands_agents_every_declared_key_with_its_type(env_id: str, backend: str, tmp_path: Path) -> None:
    resets: list[dict[str, Any]] = []
    acts: list[dict[str, Any]] = []
    config = EvalConfig(envs=(env_id,), backends=(backend,), n=2, concurrency=1, seed=5)
    records = run_episodes(config, lambda: RecordingOracle(resets, acts), "oracle", tmp_path).records
    assert len(records) == 2 and all(r.status == "done" and r.success for r in records), records
    assert len(resets) == 2 and len(acts) >= 2
    for info, record in zip(resets, records, strict=True):
        assert mismatches(info, EvalResetInfo) == []
        assert info["seed"] == record.seed and info["task_id"] == record.task_id
        assert info[REFERENCE_KEY] and all(isinstance(a, str) for a in info[REFERENCE_KEY])
    stepped = [info for info in acts if info["step"] > 0]  # an act after a step: the reset info updated with it
    assert stepped, "every episode ended on its first reply: no step info reached the agent"
    for info in stepped:
        assert mismatches({k: v for k, v in info.items() if k in STEP_KEYS}, EvalStepInfo) == []
        assert info["aborted"] is False


@pytest.mark.parametrize(("env_id", "backend"), EMBEDDED)
def test_every_packet_carries_the_declared_keys_an_aborted_step_included(env_id: str, backend: str) -> None:
    env = ScheduleEpisodes(make_eval_env(env_id, backend=backend), env_id)
    try:
        task_id = list_tasks(env)[0][0]
        env.assign(Assignment(task_id=task_id, seed=11, key="k"))
        _, info = env.reset()
        reset = info["packet"].reset_info()
        assert mismatches(reset, EvalResetInfo) == [] and reset["seed"] == 11 and REFERENCE_KEY not in reset
        _, _, terminated, truncated, info = env.step("no action in this reply")
        step = info["packet"].step_info()
        assert mismatches(step, EvalStepInfo) == [] and step["aborted"] is False and not (terminated or truncated)
        env.pending_abort = Abort(FinishReason.TASK_LIMIT, "wall-clock limit reached")
        _, reward, terminated, truncated, info = env.step("not run")
        packet: Packet = info["packet"]
        aborted = packet.step_info()
        assert mismatches(aborted, EvalStepInfo) == []
        assert (aborted["aborted"], aborted["finish_reason"], reward, terminated, truncated) == (
            True, FinishReason.TASK_LIMIT, 0.0, False, True)
        assert aborted["score"]["success"] is False and aborted["step"] == 1
        assert packet.trace is not None and packet.trace.finish_detail == "wall-clock limit reached"
    finally:
        env.close()


def test_an_abort_after_the_env_ended_still_gives_every_step_key() -> None:
    # The base env has ended (no end entries from the stack): the packet is a full step info anyway.
    env = ScheduleEpisodes(ToyEnv(), "AgentUnit/Toy-v0")
    env.assign(Assignment(task_id="t1", seed=2, key="k", reference=True))
    _, info = env.reset()
    assert info["packet"].reset_info()[REFERENCE_KEY] == ["Act: echo(hi)", "Act: answer(42)"]
    env.env.unwrapped.end_episode(FinishReason.ERROR, detail="gone")  # type: ignore[attr-defined]
    *_, info = env.abort_episode(Abort(FinishReason.ERROR, "agent failed"))
    aborted = info["packet"].step_info()
    assert mismatches(aborted, EvalStepInfo) == [] and aborted["aborted"] is True
    assert (aborted["task_id"], aborted["score"], aborted["finish_detail"]) == ("t1", {}, "agent failed")
    env.close()


def test_the_packet_accessors_check_the_kind() -> None:
    with pytest.raises(EpisodeStateError, match="no reset info"):
        Packet("step").reset_info()
    with pytest.raises(EpisodeStateError, match="no step info"):
        Packet("infra_error", error="x").step_info()


def test_a_misspelled_or_mistyped_key_is_caught_by_the_check() -> None:
    # Guards the check the tests above rely on: a writer that spelled "seed" otherwise, or
    # wrote "aborted" as a string, would fail them.
    env = ScheduleEpisodes(ToyEnv(), "AgentUnit/Toy-v0")
    env.assign(Assignment(task_id="t1", seed=2, key="k"))
    reset = dict(env.reset()[1]["packet"].reset_info())
    step = dict(env.step("Act: echo(a)")[4]["packet"].step_info())
    env.close()
    assert mismatches(reset, EvalResetInfo) == [] and mismatches(step, EvalStepInfo) == []
    reset["sead"] = reset.pop("seed")
    assert mismatches(reset, EvalResetInfo) == ["missing seed", "undeclared sead"]
    assert mismatches({**step, "aborted": "no"}, EvalStepInfo) == ["aborted='no' is not <class 'bool'>"]


@pytest.mark.parametrize("actions", ["Act: answer(42)", ("Act: answer(42)",), ["Act: answer(42)", 42], None])
def test_the_oracle_refuses_a_reference_that_is_not_a_list_of_text(actions: Any) -> None:
    with pytest.raises(ConfigError, match="reference_actions"):
        OracleAgent().reset({REFERENCE_KEY: actions})
    with pytest.raises(ConfigError, match="the oracle needs"):
        reference_actions({})


@pytest.mark.parametrize("seed", ["3", 3.0, True])
def test_the_random_agent_refuses_a_seed_that_is_not_an_integer(seed: Any) -> None:
    with pytest.raises(ConfigError, match=r"info\['seed'\] must be an int"):
        RandomAgent().reset({"seed": seed, "instruction": "x"})


def test_a_numpy_seed_is_an_int_and_seeds_the_same_draws() -> None:
    assert reset_seed({"seed": np.int64(9)}) == 9 and reset_seed({"seed": None}) is None
    tools = [{"function": {"name": "f", "parameters": {"properties": {"x": {"type": "integer"}}}}}]
    draws = []
    for seed in (9, np.int64(9)):
        agent = RandomAgent(seed=0)
        agent.reset({"seed": seed, "instruction": "x"})
        draws.append([agent.act("", {"tools": tools}) for _ in range(5)])
    assert draws[0] == draws[1]
