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
    "Reply with your reasoning after 'Think:', then exactly one action, written in one of these forms "
    "(the words in capitals stand for your own text):\n"
    "To run commands:\n"
    "Act: bash\n```bash\nYOUR COMMANDS\n```\n"
    "To answer a question (this ends the task):\n"
    "Act: answer(YOUR ANSWER)\n"
    "To say that a requested change to the system is done (this ends the task):\n"
    "Act: finish\n"
    "If a reply has several 'Act:' lines, the last one counts. "
    "Instead of an Act: form you may send one JSON tool call: "
    '{"name": "bash", "arguments": {"script": "YOUR COMMANDS"}}, '
    '{"name": "answer", "arguments": {"answer": "YOUR ANSWER"}} or {"name": "finish", "arguments": {}}.'
)
"""How to reply, stated once: in the env's first observation (``info["grammar"]``). Flush left,
because a model copies the layout it is shown."""

INTRO = (
    "The shell is Linux (Debian) and you are root. Run commands to explore and act, then either "
    "answer the question or finish the task. Command output is cut at {limit} characters."
)
"""The facts of the shell, in the first observation; who the agent is, a chat agent's system
message says (the domain's prompt), so neither repeats the other."""

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)
"""The tool names, in the order of :data:`TOOLS`."""

COMMITTING_TOOLS: tuple[str, ...] = tuple(t.name for t in TOOLS if t.commits)
"""The tools that end an episode (a reference solution ends with one)."""
