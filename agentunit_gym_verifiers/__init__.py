"""The verifiers id ``agentunit-gym-verifiers``: verifiers imports a taskset by a top-level module name.

The code lives in :mod:`agentunit_gym.integrations.verifiers`; this module only exports its
taskset, env and harness, one of each, as verifiers' loader expects (``__all__``).
"""

from agentunit_gym.integrations.verifiers import AgentUnitEnv, AgentUnitHarness, AgentUnitTaskset

__all__ = ["AgentUnitEnv", "AgentUnitHarness", "AgentUnitTaskset"]
