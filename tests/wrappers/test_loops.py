from __future__ import annotations

import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import DetectLoops
from agentunit_gym.wrappers.loops import action_key, find_loop

from ..core.toy import ToyEnv


def test_find_loop_rules() -> None:
    assert find_loop(["a", "a", "a"], 3, 3, 2) == "the same action 3 times in a row"
    assert find_loop(["a", "a"], 3, 3, 2) is None
    assert find_loop(["x", "a", "b", "a", "b"], 3, 3, 2) == "a cycle of 2 actions repeated 2 times"
    assert find_loop(["a", "b", "c", "a", "b", "c"], 3, 3, 2) == "a cycle of 3 actions repeated 2 times"
    assert find_loop(["a", "b", "c", "a", "b", "c"], 3, 2, 2) is None  # cycles of 3 not looked for
    assert find_loop(["a", "b", "a", "c"], 3, 3, 2) is None
    assert find_loop(["a", "b", "a", "b"], 3, 0, 2) is None


def test_action_key_ignores_reasoning_and_spacing() -> None:
    info = {"action": {"tool": "bash", "arguments": {"script": "ls   -la\n"}}}
    other = {"action": {"tool": "bash", "arguments": {"script": "LS -la"}}}
    assert action_key("Think: a\nAct: bash", info) == action_key("Think: b", other)
    assert action_key("  Hello  World ", {"action": None}) == action_key("hello world", {})


def test_repeated_action_is_flagged_but_goes_on_by_default() -> None:
    env = DetectLoops(ToyEnv(max_steps=10), repeats=3)
    env.reset(options={"task_id": "t1"})
    flags = []
    for reply in ["Think: x\nAct: echo(hi)", "Act: echo(hi)", "Think: again\nAct: echo(hi)"]:
        _, _, term, trunc, info = env.step(reply)
        flags.append(Flag.LOOP in info.get("flags", []))
    assert flags == [False, False, True]
    assert not term and not trunc and info["loop"] == "the same action 3 times in a row" and info["loop_count"] == 1


def test_cycle_ends_the_episode_as_tle_when_asked() -> None:
    env = DetectLoops(ToyEnv(max_steps=10), repeats=3, max_cycle=2, on_loop="end")
    env.reset(options={"task_id": "t1"})
    replies = ["Act: echo(a)", "Act: echo(b)", "Act: echo(a)", "Act: echo(b)"]
    results = [env.step(r) for r in replies]
    assert [r[3] for r in results] == [False, False, False, True]
    info = results[-1][4]
    assert info["finish_reason"] is FinishReason.TASK_LIMIT and info["limit"] == "loop"
    assert info["finish_detail"] == "loop detected: a cycle of 2 actions repeated 2 times"


def test_reset_forgets_the_previous_episode() -> None:
    env = DetectLoops(ToyEnv(max_steps=10), repeats=2)
    env.reset(options={"task_id": "t1"})
    env.step("Act: echo(a)")
    env.reset(options={"task_id": "t1"})
    _, _, _, _, info = env.step("Act: echo(a)")
    assert info["loop"] == ""
    _, _, _, _, info = env.step("Act: echo(a)")  # within one episode, the same repeat is a loop
    assert info["loop"] == "the same action 2 times in a row"


@pytest.mark.parametrize("kwargs", [{"repeats": 1}, {"cycle_repeats": 1}, {"max_cycle": -1}, {"on_loop": "panic"}])
def test_bad_options(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=next(iter(kwargs))):  # the message names the option
        DetectLoops(ToyEnv(), **kwargs)  # type: ignore[arg-type]
