"""What a chat agent is told about the DB domain: the system text and one worked example."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.domain import ExampleStep, Prompt
from agentunit_gym.tasks.agentbench_checkout import TaskModule
from agentunit_gym.tasks.spec import TaskSpec

PROMPT = Prompt(
    system="You are an assistant that answers questions about, and makes changes to, a SQL database. "
           "Each turn you think, then take exactly one action; you will see each statement's result.",
    example=(
        ExampleStep(
            "Task: how many teams are in the table 'teams'? Table teams has columns name (TEXT), city (TEXT).",
            "Think: I count the rows.\nAction: Operation\n```sql\nSELECT COUNT(*) FROM teams;\n```",
            "execute_sql", {"query": "SELECT COUNT(*) FROM teams;"},
        ),
        ExampleStep("[(4,)]", "Think: there are 4 teams.\nAction: Answer\nFinal Answer: [\"4\"]",
                    "submit_answer", {"answer": ["4"]}),
    ),
)


# ------------------------------------------------- --protocol agentbench with a checkout

AGENTBENCH_MODULE = "dbbench/__init__.py"
"""AgentBench's DB task module (v0.2, the text protocol), under ``src/server/tasks``."""


def agentbench_conversation(root: Path) -> ScriptedConversation:
    """AgentBench's opening of a DB episode, read from the checkout at ``root``.

    AgentBench's loop: the instructions as a user turn, the model's acknowledgement, then the
    task turn (the question and the table description, joined as AgentBench joins them). Its
    DB task has no one-shot example.

    Raises:
        AgentBenchCheckoutError: the module is missing or laid out otherwise.
    """
    module = TaskModule(root, AGENTBENCH_MODULE)
    injected = module.injected("start_sample")
    literal = [(item.role, item.content.literal) for item in injected[:2]]
    tasks = [item.content for item in injected[2:] if item.role == "user" and item.content.slots == 2]
    if [role for role, _ in literal] != ["user", "agent"] or any(text is None for _, text in literal) or not tasks:
        raise module.missing("the instructions, the acknowledgement and the task turn in start_sample()")
    head = (("user", str(literal[0][1])), ("assistant", str(literal[1][1])))
    return ScriptedConversation(head, tasks[0], agentbench_task_values, str(module.path))


def agentbench_task_values(task: TaskSpec, first_observation: str) -> tuple[str, ...]:
    """The DB task turn's slots: the question and the table description (AgentBench's
    ``description`` and ``add_description``)."""
    return (task.instruction, str(getattr(task, "description", "")))
