"""The sticky reset option and the lost-options check (core/task_pin.py), on the toy env."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from agentunit_gym.errors import ConfigError, LostResetOptionsError, ResetOptionError, TaskNotFoundError
from tests.core.toy import TOY_TASKS, ToyEnv

END = "Act: answer(no)"
"""A committing reply: ends the episode."""
STEP = "Act: echo(hi)"


def _end(env: ToyEnv) -> None:
    *_, terminated, _, _ = env.step(END)
    assert terminated


def test_a_sticky_reset_pins_its_task_for_every_bare_reset() -> None:
    env = ToyEnv()
    assert env.reset(seed=3, options={"task_id": "t2", "sticky": True})[1]["task_id"] == "t2"
    for _ in range(5):
        _end(env)
        assert env.reset()[1]["task_id"] == "t2"  # what an autoreset sends
    env.step(STEP)
    assert env.reset()[1]["task_id"] == "t2"  # mid-episode too: the env cannot tell it from an autoreset


@pytest.mark.parametrize("release", [
    {"seed": 0}, {"options": {}}, {"options": {"sticky": False}}, {"options": {"task_id": "t1"}},
    {"seed": 0, "options": {"task_id": "t2"}},
], ids=["seed", "empty-options", "sticky-false", "another-task", "same-task-not-sticky"])
def test_an_explicit_reset_releases_the_pin(release: dict[str, Any]) -> None:
    env, unpinned = ToyEnv(), ToyEnv()
    env.reset(seed=9, options={"task_id": "t2", "sticky": True})
    unpinned.reset(seed=9, options={"task_id": "t2"})  # the same RNG state
    _end(env)
    first = env.reset(**release)[1]["task_id"]
    assert first == unpinned.reset(**release)[1]["task_id"]
    # From here the bare resets draw with the RNG, as an env that was never pinned does.
    drawn, expected = [], []
    for _ in range(8):
        for e, out in ((env, drawn), (unpinned, expected)):
            _end(e)
            out.append(e.reset()[1]["task_id"])
    assert drawn == expected and set(drawn) == {"t1", "t2"}


def test_a_sticky_reset_without_a_task_pins_the_drawn_one_and_a_spec_pins_itself() -> None:
    env = ToyEnv()
    drawn = env.reset(seed=1, options={"sticky": True})[1]["task_id"]
    for _ in range(4):
        _end(env)
        assert env.reset()[1]["task_id"] == drawn
    spec = TOY_TASKS[0].model_copy(update={"id": "custom", "answer": "5"})
    assert env.reset(options={"task": spec, "sticky": True})[1]["task_id"] == "custom"
    _end(env)
    assert env.reset()[1]["task_id"] == "custom"


def test_bad_sticky_requests_raise() -> None:
    env = ToyEnv()
    with pytest.raises(ConfigError, match="'sticky' must be True or False, got 'yes'"):
        env.reset(options={"task_id": "t1", "sticky": "yes"})
    with pytest.raises(TaskNotFoundError, match="no task 'nope'"):  # as without sticky
        env.reset(options={"task_id": "nope", "sticky": True})
    with pytest.raises(ResetOptionError, match="unknown key"):
        env.reset(options={"task_id": "t1", "stiky": True})
    # A refused sticky reset pins nothing: bare resets draw as on an env never pinned.
    unpinned = ToyEnv()
    drawn: dict[int, list[str]] = {id(env): [], id(unpinned): []}
    for e in (env, unpinned):
        e.reset(seed=0)
        for _ in range(6):
            _end(e)
            drawn[id(e)].append(e.reset()[1]["task_id"])
    assert drawn[id(env)] == drawn[id(unpinned)] and len(set(drawn[id(env)])) == 2


def _lost(env: ToyEnv, options: dict[str, Any]) -> None:
    """The sequence gymnasium 1.4's async next-step autoreset produces: an episode ended by a
    step, the caller's reset with options, then a bare reset before any step."""
    env.reset(options={"task_id": "t1"})
    _end(env)
    env.reset(seed=4, options=options)


@pytest.mark.parametrize("options", [{"task_id": "t2"}, {"task_id": "t2", "sticky": True}, {"sticky": False}])
def test_a_bare_reset_that_lost_the_options_raises_naming_the_workaround(options: dict[str, Any]) -> None:
    env = ToyEnv()
    _lost(env, options)
    with pytest.raises(LostResetOptionsError) as caught:
        env.reset()
    message = str(caught.value)
    assert env.task is not None and f"started task {env.task.id!r}" in message
    assert "autoreset_mode=gym.vector.AutoresetMode.SAME_STEP" in message
    assert all(repr(k) in message for k in options)
    assert isinstance(caught.value, ResetOptionError) and isinstance(caught.value, ValueError)
    # The refused reset changed nothing: the caller's episode runs on.
    _, _, terminated, _, info = env.step(STEP)
    assert info["step"] == 1 and info["task_id"] == env.task.id and not terminated


@pytest.mark.parametrize("between", [
    lambda env: env.step(STEP),
    lambda env: env.reset(seed=1),
    lambda env: env.reset(options={}),
], ids=["a-step", "a-seeded-reset", "an-empty-options-reset"])
def test_a_bare_reset_after_a_step_or_an_explicit_reset_is_fine(between: Any) -> None:
    env = ToyEnv()
    _lost(env, {"task_id": "t2"})
    between(env)
    env.reset()


def test_legit_flows_that_look_close_are_not_refused() -> None:
    env = ToyEnv()
    # A first reset with options, then a bare one: no episode had ended, no autoreset was owed.
    env.reset(options={"task_id": "t2"})
    env.reset()
    # A reset with options in the middle of an episode, then a bare one.
    env.step(STEP)
    env.reset(options={"task_id": "t2"})
    env.reset()
    # After an ended episode, a reset with empty options, then a bare one.
    _end(env)
    env.reset(options={})
    env.reset()
    # A seeded reset followed by a step, then a bare one: an autoreset.
    _end(env)
    env.reset(seed=2)
    env.step(STEP)
    env.reset()


def test_a_seeded_reset_lost_the_same_way_is_refused_too() -> None:
    # gymnasium's bug repeats envs.reset(seed=s) without its seed as well: the copy would play
    # whatever its RNG draws next, not the task the seeded reset reported.
    env = ToyEnv()
    env.reset(seed=1)
    _end(env)
    started = env.reset(seed=2)[1]["task_id"]
    with pytest.raises(LostResetOptionsError, match=rf"'seed' started task '{started}'.*SAME_STEP"):
        env.reset()
    env.step(STEP)  # the episode the seeded reset started goes on: nothing was changed


@pytest.mark.parametrize("travel", [lambda e: pickle.loads(pickle.dumps(e)), copy.deepcopy], ids=["pickle", "deepcopy"])
def test_the_pin_travels_with_a_copy_and_the_pending_check_does_not(travel: Any) -> None:
    env = ToyEnv()
    env.reset(options={"task_id": "t1"})
    _end(env)
    env.reset(options={"task_id": "t2", "sticky": True})
    moved = travel(env)
    assert moved.reset()[1]["task_id"] == "t2"  # the copy has no episode: its first reset is not a lost one
    _end(moved)
    assert moved.reset()[1]["task_id"] == "t2"
    with pytest.raises(LostResetOptionsError):  # the original still checks its own
        env.reset()
