"""The task pool: loading, splits, picking, the sticky pin (core/task_pool.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.task_pool import Runner, TaskPool
from agentunit_gym.errors import ConfigError, LostResetOptionsError, ResetOptionError, TaskNotFoundError
from agentunit_gym.tasks.spec import Refusal

from .toy import TOY_DOMAIN, TOY_TASKS, ToyTask

ON_TOY = Runner[ToyTask]("toy", network=False, refusal=lambda task: None)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _split_tasks() -> list[ToyTask]:
    return [ToyTask(id=f"{split}-{i}", instruction="Say 1.", answer="1", split=split)
            for split in ("train", "test") for i in range(3)]


def test_a_split_keeps_only_its_tasks_and_an_empty_one_is_refused() -> None:
    assert [t.id for t in TaskPool(TOY_DOMAIN, _split_tasks(), "test").suite] == ["test-0", "test-1", "test-2"]
    assert len(TaskPool(TOY_DOMAIN, _split_tasks(), None).suite) == 6
    with pytest.raises(ConfigError, match="dev"):
        TaskPool(TOY_DOMAIN, _split_tasks(), "dev")


def test_the_bundled_suite_is_read_with_its_splits() -> None:
    db = get_domain("db")
    train = TaskPool(db, None, "train").suite
    test = TaskPool(db, None, "test").suite
    assert train and test and {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert {t.id for t in train} | {t.id for t in test} == {t.id for t in TaskPool(db, None, None).suite}
    assert not {t.id for t in train} & {t.id for t in test}


def test_task_files_load_and_a_mixed_list_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("tasks:\n  - {id: f1, instruction: Say 5., answer: '5'}\n", encoding="utf-8")
    assert [(t.id, t.answer) for t in TaskPool[ToyTask](TOY_DOMAIN, path, None).suite] == [("f1", "5")]
    with pytest.raises(ConfigError, match="mixes"):
        TaskPool(TOY_DOMAIN, [path, TOY_TASKS[0]], None)  # type: ignore[list-item]


def test_pick_by_id_by_spec_and_by_draw() -> None:
    pool = TaskPool[ToyTask](TOY_DOMAIN, TOY_TASKS, None)
    assert pool.pick({"task_id": "t2"}, _rng(), ON_TOY).id == "t2"
    given = pool.pick({"task": {"id": "adhoc", "instruction": "Say 9.", "answer": "9"}}, _rng(), ON_TOY)
    assert isinstance(given, ToyTask) and given.answer == "9"
    with pytest.raises(TaskNotFoundError, match="nope"):
        pool.pick({"task_id": "nope"}, _rng(), ON_TOY)
    # Draws come from what the runner can run (t3 is for another backend), the same for the same RNG.
    draws = [pool.pick({}, _rng(seed), ON_TOY).id for seed in range(20)]
    assert set(draws) == {"t1", "t2"} and draws == [pool.pick({}, _rng(seed), ON_TOY).id for seed in range(20)]


def test_the_runner_decides_what_runs_and_says_why_not() -> None:
    pool = TaskPool[ToyTask](TOY_DOMAIN, TOY_TASKS, None)
    refusing = Runner[ToyTask]("toy", network=False,
                               refusal=lambda t: Refusal("not t1 here", "t1", "use t2") if t.id == "t1" else None)
    assert [t.id for t in pool.runnable(ON_TOY)] == ["t1", "t2"]
    assert [t.id for t in pool.runnable(refusing)] == ["t2"]
    assert [(t.id, r.reason) for t, r in pool.refusals(refusing)] == [("t1", "not t1 here")]
    assert refusing.why_not(TOY_TASKS[0]) == "not t1 here" and ON_TOY.why_not(TOY_TASKS[0]) is None
    assert ON_TOY.why_not(TOY_TASKS[2]) is not None  # t3 runs on another backend
    with pytest.raises(ConfigError, match="cannot run in this env \\(not t1 here\\): use t2"):
        pool.pick({"task_id": "t1"}, _rng(), refusing)
    with pytest.raises(ConfigError, match="runs on other, not on 'toy'"):
        pool.pick({"task_id": "t3"}, _rng(), ON_TOY)
    online = ToyTask(id="net", instruction="Fetch.", needs_network=True)
    with pytest.raises(ConfigError, match="needs the network"):
        pool.pick({"task": online}, _rng(), ON_TOY)
    assert pool.pick({"task": online}, _rng(), Runner[ToyTask]("toy", network=True, refusal=lambda t: None)) == online
    nothing = Runner[ToyTask]("gpu", network=False, refusal=lambda t: Refusal("no", "all", "none"))
    with pytest.raises(ConfigError, match="no task of this suite runs on the 'gpu' backend"):
        pool.pick({}, _rng(), nothing)


def test_choose_pins_a_sticky_task_for_autoresets_until_an_explicit_reset() -> None:
    pool = TaskPool[ToyTask](TOY_DOMAIN, TOY_TASKS, None)
    first = pool.choose(None, {"task_id": "t2", "sticky": True}, episode_ended=False, rng=_rng(), runner=ON_TOY)
    pool.pin.stepped()
    autoresets = [pool.choose(None, None, episode_ended=True, rng=_rng(s), runner=ON_TOY).id for s in range(5)]
    assert first.id == "t2" and autoresets == ["t2"] * 5
    # A copy that travelled keeps the pin.
    travelled = pickle.loads(pickle.dumps(pool.travelling()))
    assert travelled.choose(None, None, episode_ended=True, rng=_rng(), runner=ON_TOY).id == "t2"
    # An explicit reset (a seed) releases it: the draws follow the RNG again.
    pool.choose(7, None, episode_ended=True, rng=_rng(7), runner=ON_TOY)
    pool.pin.stepped()
    drawn = {pool.choose(None, None, episode_ended=True, rng=_rng(s), runner=ON_TOY).id for s in range(20)}
    assert drawn == {"t1", "t2"}


def test_choose_refuses_unknown_options_and_a_lost_autoreset() -> None:
    pool = TaskPool[ToyTask](TOY_DOMAIN, TOY_TASKS, None)
    with pytest.raises(ResetOptionError, match="task_idd"):
        pool.choose(None, {"task_idd": "t1"}, episode_ended=False, rng=_rng(), runner=ON_TOY)
    pool.choose(None, {"task_id": "t1"}, episode_ended=True, rng=_rng(), runner=ON_TOY)
    with pytest.raises(LostResetOptionsError):  # a bare reset before any step after a reset with options
        pool.choose(None, None, episode_ended=False, rng=_rng(), runner=ON_TOY)
    # Nothing is pending in a travelled copy: its first bare reset draws.
    assert pool.travelling().choose(None, None, episode_ended=False, rng=_rng(), runner=ON_TOY).id in {"t1", "t2"}


def test_a_refused_reset_leaves_the_running_episode_as_it_was() -> None:
    from .toy import ToyEnv

    env = ToyEnv()
    env.reset(options={"task_id": "t1"})
    env.step("Act: echo(a)")
    for options in ({"task_id": "nope"}, {"task_id": "t3"}, {"tsak_id": "t2"}):
        with pytest.raises((ConfigError, TaskNotFoundError)):
            env.reset(options=options)
    assert env.released == 0 and env.task is not None and env.task.id == "t1" and env.steps == 1
    _, reward, terminated, _, info = env.step("Act: answer(42)")
    assert (reward, terminated, info["step"]) == (1.0, True, 2)
    env.close()
