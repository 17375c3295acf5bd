"""The server of the AgentUnit OpenEnv env project."""
