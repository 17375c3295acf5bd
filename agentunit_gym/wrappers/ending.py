"""End an episode from outside ``step`` so that the wrapper stack still sees the end.

The base env's ``end_episode`` alone ends the episode but skips every wrapper's end-of-episode
work (trap verdicts, the context count, the trace). :func:`end_episode` ends it through the
stack instead: every :class:`~agentunit_gym.wrappers.base.EpisodeWrapper` in the stack gets
its two hooks called, innermost first, as ``step`` would hand the end info outwards
(``before_episode_end()`` while the episode state is still there, then
``on_episode_end(info)``). Other wrappers (gymnasium's own) are passed through. Every
ending goes through here: the runner's
(:func:`end_episode`), a limit or policy wrapper's inside its ``step``
(:func:`end_episode_now`, which ends the stack below that wrapper; the wrappers above see
the end in ``step``'s return), and an end the base env reaches in ``step`` (each wrapper's
``step`` calls its own ``on_episode_end`` on the final step).
"""

from __future__ import annotations

# The functions live in base.py beside the wrapper class whose hooks they call (one module,
# so the two do not import each other); this module keeps the import path.
from agentunit_gym.wrappers.base import end_episode, end_episode_now

__all__ = ["end_episode", "end_episode_now"]
