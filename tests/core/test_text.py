"""Capping text with a note: the one helper envs and the trace wrapper share."""

from __future__ import annotations

import pytest

from agentunit_gym.core.text import cap_text
from agentunit_gym.wrappers.trace import TRACE_NOTE

NOTE = "\n[{shown} of {total} shown, {omitted} cut]"


@pytest.mark.parametrize("text", ["", "abc", "x" * 10])
def test_text_that_fits_comes_back_unchanged(text: str) -> None:
    assert cap_text(text, 10, NOTE) is text


def test_cut_text_keeps_the_head_and_says_how_much_was_cut() -> None:
    assert cap_text("abcdefghijkl", 10, NOTE) == "abcdefghij\n[10 of 12 shown, 2 cut]"
    assert cap_text("héllo wörld", 5, NOTE) == "héllo\n[5 of 11 shown, 6 cut]"  # characters, not bytes
    assert cap_text("abc", 0, NOTE) == "\n[0 of 3 shown, 3 cut]"


def test_the_trace_wrapper_note() -> None:
    assert cap_text("a" * 12, 10, TRACE_NOTE) == "a" * 10 + "\n[... 2 more characters not recorded]"
    assert cap_text("a" * 10, 10, TRACE_NOTE) == "a" * 10
