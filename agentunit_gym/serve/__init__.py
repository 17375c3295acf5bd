"""Serving envs to agents elsewhere: the MCP server (``mcp_server``) over the episode pool
(``served_episodes``). Nothing is imported here: the MCP SDK is an optional extra."""
