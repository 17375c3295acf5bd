"""How the WebShop domain runs under the AgentBench protocols (``eval --protocol``).

WebShop's text env performs nothing on an action it cannot take (a click on something the
page does not list): the agent reads the same page again and the episode goes on. So under
both protocols a refused move shows the page again (``invalid_move="same_page"``) instead of
our feedback. What ends an episode differs between AgentBench's two WebShop loops:

- ``agentbench`` (the ReAct loop): a reply in which it finds no ``search[...]`` or
  ``click[...]`` ends the episode (validation failed); nothing else does.
- ``agentbench-fc`` (the function-calling loop, ``src/server/tasks/webshop/task.py``): a
  reply without a tool call, or with one it cannot read, is answered ("No executable tool
  calls found! ...") and the loop goes on; no invalid reply ends the episode.
"""

from __future__ import annotations

from agentunit_gym.core.domain import ProtocolPreset
from agentunit_gym.domains.webshop.prompt import agentbench_conversation

NO_PARSEABLE_ACTION = frozenset({"no_call", "malformed", "unknown_tool"})
"""The ``action_error`` issues of a reply in which AgentBench's ReAct loop finds no action."""

PROTOCOLS = {
    "agentbench": ProtocolPreset(env_options={"invalid_move": "same_page"}, ending_issues=NO_PARSEABLE_ACTION,
                                 conversation=agentbench_conversation),
    "agentbench-fc": ProtocolPreset(env_options={"invalid_move": "same_page"}, ending_issues=frozenset()),
}
