"""OpenEnv's client for this env: the generic client with the server's bearer token."""

from agentunit_gym.serve.openenv_client import AgentUnitEnvClient

__all__ = ["AgentUnitEnvClient"]
