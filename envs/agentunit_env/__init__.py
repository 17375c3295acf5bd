"""The AgentUnit env server as an OpenEnv env project (``openenv validate`` checks this folder)."""

from agentunit_gym.serve.openenv_client import AgentUnitEnvClient

__all__ = ["AgentUnitEnvClient"]
