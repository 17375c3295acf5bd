"""The OS domain's tools, grammar and intro: one definition, read by the env, the task model and the prompt."""

from __future__ import annotations

from agentunit_gym.core.actions import Param, ToolSpec

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("bash", "Run a bash script in your shell and see its output.",
             (Param("script", "string", "the bash commands to run"),)),
    ToolSpec("answer", "Give the final answer to the question; ends the episode.",
             (Param("answer", "string", "the answer"),), commits=True),
    ToolSpec("finish", "Say that the requested change is done; ends the episode.", commits=True),
)

GRAMMAR = (
    "Reply with your reasoning after 'Think:' and then exactly one action:\n"
    "  Act: bash\n  ```bash\n  <commands>\n  ```\n"
    "  Act: answer(<your answer>)\n"
    "  Act: finish\n"
    "Use answer(...) for questions, finish when you were asked to change the system. "
    "If a reply has several 'Act:' lines, the last one counts.\n"
    "Instead of the Act: forms you may send one JSON tool call: "
    '{"name": "bash", "arguments": {"script": "<commands>"}}, '
    '{"name": "answer", "arguments": {"answer": "<text>"}} or {"name": "finish", "arguments": {}}.'
)

INTRO = (
    "You are an assistant operating a Linux (Debian) shell as root. Each turn, run commands "
    "to explore and act, then either answer the question or finish the task. Command output "
    "is cut at {limit} characters."
)

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)
"""The tool names, in the order of :data:`TOOLS`."""

COMMITTING_TOOLS: tuple[str, ...] = tuple(t.name for t in TOOLS if t.commits)
"""The tools that end an episode (a reference solution ends with one)."""
