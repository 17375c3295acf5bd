"""How the WebShop domain runs under the AgentBench protocols (``eval --protocol``).

WebShop's text env performs nothing on an action it cannot take (a click on something the
page does not list): the agent reads the same page again and the episode goes on. What
AgentBench's WebShop loop does end is a reply in which it finds no action at all. So under
these protocols only a reply with no parseable action ends the episode, and a refused move
shows the page again (``invalid_move="same_page"``) instead of our feedback.
"""

from __future__ import annotations

from agentunit_gym.core.domain import ProtocolPreset

NO_PARSEABLE_ACTION = frozenset({"no_call", "malformed", "unknown_tool"})
"""The ``action_error`` issues of a reply in which AgentBench finds no ``search[...]`` or ``click[...]``."""

PROTOCOLS = {
    "agentbench": ProtocolPreset(env_options={"invalid_move": "same_page"}, ending_issues=NO_PARSEABLE_ACTION),
    "agentbench-fc": ProtocolPreset(env_options={"invalid_move": "same_page"}, ending_issues=NO_PARSEABLE_ACTION),
}
