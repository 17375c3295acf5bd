"""The OS domain: AgentBench's OS interaction task, a persistent bash in a sandbox (docker or local).

Exports :data:`DOMAIN`, registered under the entry-point group ``agentunit_gym.domains``.
"""

from agentunit_gym.domains.os.domain import DOMAIN

__all__ = ["DOMAIN"]
