"""How the OS domain runs under the AgentBench protocols (``eval --protocol``).

The tool schemas of AgentBench FC are those of its ``configs/tasks/os.yaml`` (the
function-calling release), so a model tuned on AgentBench FC sees the tools it was trained
on; each maps onto the env's own tool.
"""

from __future__ import annotations

from agentunit_gym.core.domain import ProtocolPreset, ToolAlias
from agentunit_gym.domains.os.prompt import agentbench_conversation


def _function(name: str, description: str, param: str, param_description: str) -> dict[str, object]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {param: {"type": "string", "description": param_description}},
                       "required": [param], "additionalProperties": False},
    }}


FC_TOOLS: tuple[ToolAlias, ...] = (
    ToolAlias(_function("bash_action", "Execute bash code to perform an operation in the Linux environment.",
                        "script", "The bash script to be executed."), tool="bash"),
    ToolAlias(_function("finish_action",
                        "Indicate that the task has been finished or need some additional information to be finished.",
                        "thought", "The thought or reason indicating the task is finished."),
              tool="finish", arguments={"thought": None}),
    ToolAlias(_function("answer_action", "Provide the answer to the question.",
                        "answer", "The answer to the question."), tool="answer"),
)

AGENTBENCH_OBSERVATION_LIMIT = 800
"""Characters of command output AgentBench's OS task shows the agent."""

PROTOCOLS = {
    "agentbench": ProtocolPreset(env_options={"observation_limit": AGENTBENCH_OBSERVATION_LIMIT},
                                 conversation=agentbench_conversation),
    "agentbench-fc": ProtocolPreset(env_options={"observation_limit": AGENTBENCH_OBSERVATION_LIMIT},
                                    tools=FC_TOOLS),
}
