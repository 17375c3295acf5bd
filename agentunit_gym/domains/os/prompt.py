"""What a chat agent is told about the OS domain: the system text and one worked example."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.domain import ExampleStep, Prompt
from agentunit_gym.tasks.agentbench_checkout import TaskModule
from agentunit_gym.tasks.spec import TaskSpec

PROMPT = Prompt(
    system="You are an assistant that will act like a person operating a Linux shell. "
           "Each turn you think, then take exactly one action. You will get the output of each command.",
    example=(
        ExampleStep(
            "Task: how many lines does /etc/hostname have?",
            "Think: I count the lines with wc.\nAct: bash\n```bash\nwc -l < /etc/hostname\n```",
            "bash", {"script": "wc -l < /etc/hostname"},
        ),
        ExampleStep("The output of the OS:\n1", "Think: the file has one line.\nAct: answer(1)",
                    "answer", {"answer": "1"}),
    ),
)


# ------------------------------------------------- --protocol agentbench with a checkout

AGENTBENCH_MODULE = "os_interaction/task.py"
"""AgentBench's OS task module (v0.2, the text protocol), under ``src/server/tasks``."""


def agentbench_conversation(root: Path) -> ScriptedConversation:
    """AgentBench's opening of an OS episode, read from the checkout at ``root``.

    AgentBench's loop: one user turn with the instructions, its opener and the one-shot's
    question; the one-shot's remaining turns; then the task turn (its opener and the task's
    description). Its ``ONE_SHOT`` list says ``agent`` for the model; here ``assistant``.

    Raises:
        AgentBenchCheckoutError: the module is missing or laid out otherwise.
    """
    module = TaskModule(root, AGENTBENCH_MODULE)
    shots = module.constant("ONE_SHOT")
    if not (isinstance(shots, list) and len(shots) >= 2 and all(
            isinstance(s, dict) and isinstance(s.get("content"), str) for s in shots)):
        raise module.missing("ONE_SHOT as a list of {'role', 'content'} turns")
    users = [item.content for item in module.injected("_judge") if item.role == "user"]
    instructions = users[0].literal if users else None
    tasks = [t for t in users[1:] if t.slots == 1 and t.parts and isinstance(t.parts[0], str)]
    openers = [t for t in module.appended("_judge") if t.slots == 1 and t.parts and isinstance(t.parts[0], str)]
    if instructions is None or not tasks or not openers:
        raise module.missing("the instructions, the one-shot's opener and the task's opener in _judge()")
    head = [("user", instructions + openers[-1].fill(shots[0]["content"]))]
    head += [("assistant" if s.get("role") == "agent" else str(s.get("role")), s["content"]) for s in shots[1:]]
    return ScriptedConversation(tuple(head), tasks[0], agentbench_task_values, str(module.path))


def agentbench_task_values(task: TaskSpec, first_observation: str) -> tuple[str, ...]:
    """The OS task turn's one slot: the task's description (its instruction)."""
    return (task.instruction,)
