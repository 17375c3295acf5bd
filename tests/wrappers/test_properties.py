"""Property tests: arbitrary Unicode, control characters, megabyte replies and near-valid grammar
thrown at the full stack over the toy env never raise, and every reply is classified. The same
runs for every registered domain in tests/domains/test_conformance.py."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentunit_gym.core import ActionIssue
from agentunit_gym.core.trace import EpisodeTrace, Flag
from agentunit_gym.wrappers import make_eval_env
from agentunit_gym.wrappers.classify import REPLY_CLASSES

from .fakes import TOY_ID, register_toys

pytestmark = pytest.mark.timeout(300)

# Every code point class, surrogates excluded (they cannot be encoded and no agent sends them).
junk = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
controls = st.text(st.characters(min_codepoint=0, max_codepoint=0x1F), min_size=1, max_size=50)
megabyte = st.builds(lambda piece, n: (piece * (1_000_000 // max(1, len(piece)) + 1))[:n],
                     st.text(min_size=1, max_size=8), st.integers(500_000, 1_100_000))


def near_valid(domain: str) -> st.SearchStrategy[str]:
    """Replies one edit away from the toy grammar: right markers with junk, or junk around right
    markers. (Every registered domain's own grammar gets the same treatment in the domain
    conformance suite, tests/domains/test_conformance.py.)"""
    templates = ["Act: echo({j})", "Act: answer({j})", "Act: {j}({j})", "Act: echo({j}"]
    json_templates = ['{{"name": {js}, "arguments": {{}}}}', '{{"name": "answer", "arguments": {js}}}',
                      '{{"name": {js}', '```json\n{{"name": {js}, "arguments": {{"x": 1}}}}\n```', "{{{j}"]

    def fill(template: str, text: str) -> str:
        return template.format(j=text, q=shlex.quote(text), js=json.dumps(text))

    return st.builds(fill, st.sampled_from(templates + json_templates), junk)


def replies(domain: str) -> st.SearchStrategy[str]:
    return st.one_of(junk, controls, near_valid(domain), megabyte)


def _check_step(env: gym.Env[str, str], reply: str) -> None:
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(reply)
    assert isinstance(observation, str) and isinstance(reward, float)
    assert info["reply_class"] in REPLY_CLASSES
    if info["reply_class"].startswith("invalid"):
        error = info["action_error"]
        assert error["reason"] == info["reply_class"]
        assert error["issue"] in {i.value for i in ActionIssue}
        assert Flag.INVALID_FORMAT in info["flags"] or Flag.INVALID_ACTION in info["flags"]
    else:
        assert info["action"] is not None or info["reply_class"] == "skipped"
    assert all(isinstance(f, Flag) for f in info.get("flags", []))
    if terminated or truncated:
        trace = info["trace"]
        assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace
        assert len(trace.steps[0].raw_action) <= 4100  # capped, even for a megabyte reply


@pytest.fixture(scope="module")
def toy_env() -> Iterator[gym.Env[str, str]]:
    register_toys()
    env = make_eval_env(TOY_ID, max_context_tokens=100_000)
    yield env
    env.close()


# No example database: the tests write nothing into the tree.
_SETTINGS = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(_SETTINGS, max_examples=50)
@given(reply=replies("toy"))
def test_toy_stack_classifies_anything(toy_env: gym.Env[str, str], reply: str) -> None:
    _check_step(toy_env, reply)


@settings(_SETTINGS, max_examples=10)
@given(episode=st.lists(replies("toy"), min_size=1, max_size=6))
def test_toy_trace_matches_what_happened(toy_env: gym.Env[str, str], episode: list[str]) -> None:
    toy_env.reset(seed=0)
    flags, ended = [], None
    for reply in episode:
        _, _, terminated, truncated, info = toy_env.step(reply)
        flags.append(tuple(info.get("flags", [])))
        if terminated or truncated:
            ended = info
            break
    if ended is None:
        return
    trace = ended["trace"]
    assert len(trace.steps) == len(flags)
    assert [s.flags for s in trace.steps] == flags
    assert trace.finish_reason is ended["finish_reason"]
