"""How the KG domain runs under the AgentBench protocols (``eval --protocol``).

AgentBench's knowledgegraph task never ends an episode on an invalid reply: a reply without
an ``Action:`` line, an unknown function, a call that fails, and a ``Final Answer`` of a
variable that does not exist are each answered with its error text, and the loop goes on
until the turn limit. So no invalid reply ends the episode here either.
"""

from __future__ import annotations

from agentunit_gym.core.domain import ProtocolPreset
from agentunit_gym.domains.kg.prompt import agentbench_conversation

PROTOCOLS = {
    "agentbench": ProtocolPreset(ending_issues=frozenset(), conversation=agentbench_conversation),
    "agentbench-fc": ProtocolPreset(ending_issues=frozenset()),
}
