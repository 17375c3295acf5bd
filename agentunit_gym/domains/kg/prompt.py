"""The KG prompt: what the tools do, and a worked example in AgentBench's one-shot style.

The example runs on the bundled graph (a test replays it, so its observations stay true).
"""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.domain import ExampleStep, Prompt
from agentunit_gym.tasks.agentbench_checkout import TaskModule
from agentunit_gym.tasks.spec import TaskSpec

INSTRUCTIONS = """\
You answer questions with the facts stored in a knowledge base, which you query with the tools below.

1. get_relations(variable: var) -> list of relations
   A variable is an entity, or a set of entities made by an earlier call (#0, #1 ...). Lists the relations
   that leave it, so you can choose the one that leads towards the answer. Its argument is always an entity
   or a variable, e.g. get_relations(France) or get_relations(#0).
2. get_neighbors(variable: var, relation: str) -> variable
   All entities the variable reaches through the relation. Call get_relations on the same variable first:
   only a relation it listed can be followed. Example: get_neighbors(France, location.country.adjoins).
3. intersection(variable1: var, variable2: var) -> variable
   The entities in both variables. The two variables MUST be of the same type.
4. get_attributes(variable: var) -> list of attributes
   Lists the numerical attributes of a variable. Use it only when the question asks for a superlative
   (the largest, the smallest ...), before argmax or argmin.
5. argmax(variable: var, attribute: str) -> variable
   The entities of the variable with the largest value of the attribute (one listed by get_attributes).
6. argmin(variable: var, attribute: str) -> variable
   The entities of the variable with the smallest value of the attribute (one listed by get_attributes).
7. count(variable: var) -> int
   The number of entities in the variable.

Each call that makes a variable names it #k, counting from #0. You get the observation of each action, then
you act again. You can take at most {max_steps} actions to find the answer.

{grammar}
"""

GRAMMAR = (
    "Reply with a short thought, then ONE action, in one of these forms (the words in capitals stand for your "
    "own text):\n"
    "Thought: YOUR REASONING\nAction: TOOL(ARGUMENTS)\n"
    "or, when a variable #K holds the answer (this ends the task):\n"
    "Thought: YOUR REASONING\nFinal Answer: #K"
)
"""How to reply, stated once: in the first observation (``info["grammar"]``)."""

EXAMPLE: list[tuple[str, str]] = [
    ("A new question: Which countries border both France and Germany?\nEntities: [France, Germany]",
     "Thought: I need the countries that border France. I will look at the relations of France first.\n"
     "Action: get_relations(France)"),
    ("Observation: [location.country.adjoins, location.country.administrative_divisions, "
     "location.country.capital, location.country.cities, location.country.continent, "
     "location.country.currency_used, location.country.languages_spoken]",
     "Thought: location.country.adjoins gives the neighbours of France.\n"
     "Action: get_neighbors(France, location.country.adjoins)"),
    ("Observation: variable #0, which are instances of location.country",
     "Thought: Now the neighbours of Germany, the same way.\nAction: get_relations(Germany)"),
    ("Observation: [location.country.adjoins, location.country.administrative_divisions, "
     "location.country.capital, location.country.cities, location.country.continent, "
     "location.country.currency_used, location.country.languages_spoken]",
     "Thought: location.country.adjoins again.\nAction: get_neighbors(Germany, location.country.adjoins)"),
    ("Observation: variable #1, which are instances of location.country",
     "Thought: The countries bordering both are in #0 and in #1.\nAction: intersection(#0, #1)"),
    ("Observation: variable #2, which are instances of location.country",
     "Thought: #2 holds the countries that border both France and Germany.\nFinal Answer: #2"),
]
"""(user, assistant) turns: the user turns are the env's observations, the assistant turns the agent's replies."""

EXAMPLE_ENTITIES = {"France": "m.country_fr", "Germany": "m.country_de"}


def task_prompt(question: str, entity_names: list[str], max_steps: int) -> str:
    """The first observation of an episode: the instructions, then the question and its entities."""
    return (INSTRUCTIONS.format(max_steps=max_steps, grammar=GRAMMAR)
            + f"\nA new question: {question}\nEntities: [{', '.join(entity_names)}]")


def _as_step(observation: str, reply: str) -> ExampleStep:
    line = reply.splitlines()[-1]
    if line.startswith("Final Answer:"):
        return ExampleStep(observation, reply, "final_answer", {"variable": line.split(":", 1)[1].strip()})
    call = line.split("Action:", 1)[1].strip()
    name, inside = call.split("(", 1)
    from agentunit_gym.domains.kg.task import TOOL_PARAMS

    values = [v.strip() for v in inside.rstrip(")").split(",")]
    return ExampleStep(observation, reply, name, dict(zip(TOOL_PARAMS[name], values, strict=True)))


PROMPT = Prompt(
    system="You are an agent that answers questions with the knowledge stored in a knowledge base, "
           "which you query with tools. Each turn you think, then take exactly one action; "
           "you will see its observation.",
    example=tuple(_as_step(observation, reply) for observation, reply in EXAMPLE),
)
"""What a chat agent is told about the KG domain: the system text and the worked example."""


# ------------------------------------------------- --protocol agentbench with a checkout

AGENTBENCH_MODULE = "knowledgegraph/task.py"
"""AgentBench's KG task module (v0.2, the text protocol), under ``src/server/tasks``."""


def agentbench_conversation(root: Path) -> ScriptedConversation:
    """AgentBench's opening of a KG episode, read from the checkout at ``root``.

    AgentBench's loop: ``INSTRUCTIONS`` as a user turn, the model's acknowledgement, the
    ``ONE_SHOT`` turns (user, model, user ...), then the task turn (the question and the topic
    entities' names).

    Raises:
        AgentBenchCheckoutError: the module is missing or laid out otherwise.
    """
    module = TaskModule(root, AGENTBENCH_MODULE)
    instructions = module.constant("INSTRUCTIONS")
    shots = module.constant("ONE_SHOT")
    if not isinstance(instructions, str) or not (
            isinstance(shots, list) and len(shots) % 2 == 0 and all(isinstance(s, str) for s in shots)):
        raise module.missing("INSTRUCTIONS as a string and ONE_SHOT as an even list of strings")
    injected = module.injected("start_sample")
    acks = [item.content.literal for item in injected if item.role == "agent" and item.content.literal is not None]
    tasks = [item.content for item in injected if item.role == "user" and item.content.slots == 2]
    if not acks or not tasks:
        raise module.missing("the acknowledgement and the task turn in start_sample()")
    head = [("user", instructions), ("assistant", str(acks[0]))]
    head += [("user" if index % 2 == 0 else "assistant", shot) for index, shot in enumerate(shots)]
    return ScriptedConversation(tuple(head), tasks[0], agentbench_task_values, str(module.path))


def agentbench_task_values(task: TaskSpec, first_observation: str) -> tuple[str, ...]:
    """The KG task turn's slots: the question, and the topic entities' names joined by ", "."""
    entities = getattr(task, "entities", {}) or {}
    return (task.instruction, ", ".join(entities))
