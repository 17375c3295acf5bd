"""How the DB domain runs under the AgentBench protocols (``eval --protocol``).

The tool schemas of AgentBench FC are those of its ``configs/tasks/dbbench.yaml`` (the
function-calling release); ``commit_final_answer`` becomes the env's ``submit_answer``
(an empty list for a task that modifies the database).
"""

from __future__ import annotations

from agentunit_gym.core.domain import ProtocolPreset, ToolAlias
from agentunit_gym.domains.db.prompt import agentbench_conversation

FC_TOOLS: tuple[ToolAlias, ...] = (
    ToolAlias({"type": "function", "function": {
        "name": "execute_sql",
        "description": "Executes a given SQL statement on the database and returns the result.",
        "parameters": {"type": "object",
                       "properties": {"query": {"type": "string", "description": "The SQL query to be executed."}},
                       "required": ["query"], "additionalProperties": False},
    }}, tool="execute_sql"),
    ToolAlias({"type": "function", "function": {
        "name": "commit_final_answer",
        "description": "Commits the final answer after all operations are completed.",
        "parameters": {"type": "object",
                       "properties": {"answers": {"type": "array", "items": {"type": "string"},
                                                  "description": "The list of final answers to commit."}},
                       "required": ["answers"], "additionalProperties": False},
    }}, tool="submit_answer", arguments={"answers": "answer"}),
)

PROTOCOLS = {
    "agentbench": ProtocolPreset(conversation=agentbench_conversation),
    "agentbench-fc": ProtocolPreset(tools=FC_TOOLS),
}
