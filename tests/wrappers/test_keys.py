"""Each wrapper declares the ``info`` keys it adds (wrappers/keys.py), and the wrapped shapes hold them all."""

from __future__ import annotations

import re
from typing import get_type_hints

from agentunit_gym import wrappers
from agentunit_gym.core import info as core_info
from agentunit_gym.wrappers import aliases, keys


def _declarations() -> dict[str, type]:
    return {name: obj for name, obj in vars(keys).items()
            if isinstance(obj, type) and re.fullmatch(r"\w+?(Reset)?Keys", name) and obj.__module__ == keys.__name__}


def test_each_wrappers_keys_are_named_after_a_wrapper_that_exists() -> None:
    named = {re.sub(r"(Reset)?Keys$", "", name) for name in _declarations()} - {"Flag", "SkippedReply"}
    assert named == {"ClassifyActions", "InjectTraps", "DetectLoops", "LimitEpisode", "LimitContext", "RecordTrace",
                     "RenameTools"}
    for name in named:
        assert hasattr(wrappers, name) or hasattr(aliases, name), name


def test_the_wrapped_shapes_are_the_envs_keys_plus_every_wrappers() -> None:
    declared = _declarations()
    step = set(get_type_hints(keys.WrappedStepInfo))
    reset = set(get_type_hints(keys.WrappedResetInfo))
    assert step - set(get_type_hints(core_info.StepInfo)) == {
        k for name, cls in declared.items() if not name.endswith("ResetKeys") for k in get_type_hints(cls)}
    assert reset - set(get_type_hints(core_info.ResetInfo)) == {
        "invalid_policy", "trap", "step_limit", "time_limit_s", "context_tokens", "context_counter",
        "max_context_tokens", "protocol_tools"}
    # The core declares no wrapper's key: none of its TypedDicts has one.
    core_shapes = [obj for obj in vars(core_info).values() if isinstance(obj, type) and hasattr(obj, "__total__")]
    assert len(core_shapes) >= 5
    assert not {k for shape in core_shapes for k in get_type_hints(shape)} & (step | reset) - (
        set(get_type_hints(core_info.StepInfo)) | set(get_type_hints(core_info.ResetInfo)))
