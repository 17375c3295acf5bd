"""Reference actions whose text is known only during the episode.

Most reference steps are fixed text the oracle sends as is. Some are not: AgentBench's
check-style OS items are solved by running their example script and answering with what it
printed, which depends on the sandbox the episode runs in. Such a step
(``ReferenceStep(from_output=True)``) is rendered as an :class:`OutputReply`: a ``str``
holding the reply with a readable placeholder, which the oracle completes with
:meth:`OutputReply.complete` from the observation the previous step produced.

An :class:`OutputReply` is plain data plus a module-level function, so it pickles with the
reset ``info`` into an ``AsyncVectorEnv`` worker and back.

Example:

    >>> reply = OutputReply("Act: answer(", ")", extract=str.strip)
    >>> reply                      # a str, with a placeholder where the output goes
    'Act: answer(<output of the previous step>)'
    >>> reply.complete("  42\\n")
    'Act: answer(42)'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

PLACEHOLDER = "<output of the previous step>"
"""What an incomplete :class:`OutputReply` shows in place of the output (logs, ``tasks show``)."""

SENTINEL = "@@agentunit-output-from-previous-step@@"
"""Rendered in place of the output to find where it goes; plain ASCII, so JSON leaves it as is."""


class OutputReply(str):
    """A reply whose primary argument is the output the previous step showed.

    Args:
        before: the reply's text before the output.
        after: the reply's text after the output.
        extract: ``observation -> output``: the env's reading of its own observation text
            (a module-level function, so the reply pickles).
        json_string: the output goes inside a JSON string (a JSON tool call): escape it.
    """

    before: str
    after: str
    extract: Callable[[str], str]
    json_string: bool

    def __new__(cls, before: str, after: str, *, extract: Callable[[str], str],
                json_string: bool = False) -> OutputReply:
        self = super().__new__(cls, before + PLACEHOLDER + after)
        self.before = before
        self.after = after
        self.extract = extract
        self.json_string = json_string
        return self

    @classmethod
    def from_rendering(cls, rendered: str, *, extract: Callable[[str], str], json_string: bool) -> OutputReply:
        """Split a reply rendered with :data:`SENTINEL` as the argument.

        Raises:
            ValueError: the sentinel does not occur exactly once in ``rendered``.
        """
        parts = rendered.split(SENTINEL)
        if len(parts) != 2:
            raise ValueError(f"the rendered reply holds the output marker {len(parts) - 1} times, expected once")
        return cls(parts[0], parts[1], extract=extract, json_string=json_string)

    def complete(self, observation: str) -> str:
        """The reply, with the output read from ``observation`` in its place."""
        output = self.extract(observation)
        if self.json_string:
            output = json.dumps(output, ensure_ascii=False)[1:-1]
        return self.before + output + self.after

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.before, self.after, self.extract, self.json_string))


def _rebuild(before: str, after: str, extract: Callable[[str], str], json_string: bool) -> OutputReply:
    return OutputReply(before, after, extract=extract, json_string=json_string)
