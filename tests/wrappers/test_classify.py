from __future__ import annotations

import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers import ClassifyActions

from ..core.toy import ToyEnv


def test_every_reply_class_and_its_detail() -> None:
    env = ClassifyActions(ToyEnv(max_steps=10))
    env.reset(options={"task_id": "t1"})
    _, _, _, _, info = env.step("just chatting")
    assert info["reply_class"] == "invalid_format"
    assert info["action_error"]["issue"] == "no_call" and info["flags"] == [Flag.INVALID_FORMAT]
    _, _, _, _, info = env.step('{"name": "echo", "arguments": ')
    assert info["reply_class"] == "invalid_format" and info["action_error"]["issue"] == "malformed"
    _, _, _, _, info = env.step('{"name": "echo", "arguments": {}}')
    assert info["reply_class"] == "invalid_action" and info["action_error"]["issue"] == "missing_parameter"
    assert info["flags"] == [Flag.INVALID_ACTION]
    _, _, _, _, info = env.step('{"name": "echo", "arguments": {"text": "a", "loud": true}}')
    assert info["action_error"]["issue"] == "invalid_parameter"
    _, _, _, _, info = env.step("Act: echo(fail)")
    assert info["reply_class"] == "action" and info["flags"] == [Flag.EXECUTION_ERROR]
    assert info["invalid_count"] == 4


def test_unknown_tool_is_a_hallucination_with_a_hint_added() -> None:
    env = ClassifyActions(ToyEnv())
    env.reset(options={"task_id": "t1"})
    # ToyEnv's own parser gives no hint for an unknown ReAct tool: the wrapper adds one.
    obs, _, _, _, info = env.step("Act: anwser(42)")
    assert info["action_error"]["hint"] == "Did you mean 'answer'?"
    assert obs == "Invalid action: unknown tool 'anwser'. Did you mean 'answer'?"
    assert info["flags"] == [Flag.INVALID_ACTION, Flag.HALLUCINATION]


def test_format_hint_shows_the_grammar_when_nothing_is_close() -> None:
    env = ClassifyActions(ToyEnv())
    env.reset(options={"task_id": "t1"})
    obs, _, _, _, info = env.step("I think the answer is 42")
    assert info["action_error"]["hint"] == "Write the action as: Act: echo(<text>) or Act: answer(<text>)"
    assert obs.endswith(info["action_error"]["hint"])


def test_hints_can_be_switched_off() -> None:
    env = ClassifyActions(ToyEnv(), hints=False)
    env.reset(options={"task_id": "t1"})
    obs, _, _, _, info = env.step("Act: anwser(42)")
    assert info["action_error"]["hint"] == "" and "Did you mean" not in obs
    assert obs == "Invalid action: unknown tool 'anwser'." and info["reply_class"] == "invalid_action"
    # The same reply with hints on gets one: switching them off is what removed it.
    hinted = ClassifyActions(ToyEnv())
    hinted.reset(options={"task_id": "t1"})
    obs, _, _, _, info = hinted.step("Act: anwser(42)")
    assert info["action_error"]["hint"] == "Did you mean 'answer'?" and obs.endswith(" Did you mean 'answer'?")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("no action here", FinishReason.INVALID_FORMAT), ("Act: launch(rockets)", FinishReason.INVALID_ACTION)],
)
def test_terminate_policy_ends_with_if_or_ia(reply: str, reason: FinishReason) -> None:
    base = ToyEnv()
    assert base.invalid_action == "continue"  # the policy comes from the wrapper
    env = ClassifyActions(base, policy="terminate")
    env.reset(options={"task_id": "t1"})
    _, reward, term, trunc, info = env.step(reply)
    assert (reward, term, trunc) == (0.0, True, False)
    assert info["finish_reason"] is reason and info["score"]["success"] is False
    assert base.finish_reason is reason


def test_continue_policy_keeps_going_and_max_invalid_ends_later() -> None:
    env = ClassifyActions(ToyEnv(max_steps=10), max_invalid=3)
    env.reset(options={"task_id": "t1"})
    for _ in range(2):
        _, _, term, trunc, info = env.step("nothing")
        assert not term and not trunc
    _, _, term, _, info = env.step("Act: nope(1)")
    assert term and info["finish_reason"] is FinishReason.INVALID_ACTION
    assert info["finish_detail"].startswith("3 invalid replies")


def test_env_that_already_terminates_is_left_alone() -> None:
    env = ClassifyActions(ToyEnv(invalid_action="terminate"), policy="terminate")
    env.reset(options={"task_id": "t1"})
    _, reward, term, trunc, info = env.step("nothing")
    assert term and info["finish_reason"] is FinishReason.INVALID_FORMAT
    # The env's own end stands: its detail, not the wrapper's "1 invalid reply: ...".
    assert (reward, trunc, info["finish_detail"]) == (0.0, False, "no 'Act:' line found.")
    assert info["reply_class"] == "invalid_format" and info["invalid_count"] == 1


def test_bad_options() -> None:
    with pytest.raises(ConfigError):
        ClassifyActions(ToyEnv(), policy="explode")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ClassifyActions(ToyEnv(), max_invalid=0)


def test_ending_issues_narrow_which_invalid_replies_end_the_episode() -> None:
    # AgentBench's WebShop loop ends on a reply with no action, and goes on after a move it cannot take.
    env = ClassifyActions(ToyEnv(max_steps=10), policy="terminate", ending_issues={"no_call"})
    env.reset(options={"task_id": "t1"})
    _, _, term, trunc, info = env.step("Act: launch(rockets)")  # unknown_tool: classified, counted, goes on
    assert not term and not trunc
    assert info["reply_class"] == "invalid_action" and info["invalid_count"] == 1
    _, reward, term, _, info = env.step("no action here")  # no_call: ends it
    assert term and reward == 0.0 and info["finish_reason"] is FinishReason.INVALID_FORMAT
    assert info["finish_detail"].startswith("1 invalid reply") and info["invalid_count"] == 2


def test_empty_ending_issues_never_end_the_episode() -> None:
    # AgentBench's KG loop answers every invalid reply with its error text and goes on.
    env = ClassifyActions(ToyEnv(max_steps=3), policy="terminate", ending_issues=frozenset())
    env.reset(options={"task_id": "t1"})
    for reply in ("no action here", "Act: launch(rockets)"):
        _, _, term, trunc, info = env.step(reply)
        assert not term and not trunc and info["reply_class"] != "action"
    _, _, term, trunc, info = env.step("still nothing")
    assert trunc and info["finish_reason"] is FinishReason.TASK_LIMIT and info["invalid_count"] == 3
