"""What a chat agent is told about the WebShop domain: the system text and one worked example.

The example is AgentBench's one-shot in form (search, open a product, choose an option,
buy), written over our own catalog's pages.
"""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.domain import ExampleStep, Prompt
from agentunit_gym.errors import AgentBenchCheckoutError
from agentunit_gym.tasks.agentbench_checkout import TaskModule
from agentunit_gym.tasks.spec import TaskSpec

_INSTRUCTION = "i need a fleece lined hoodie in size large, and price lower than 40.00 dollars"
_HEAD = f"Instruction: [SEP] {_INSTRUCTION} [SEP] Back to Search"

PAGE_GUIDE = ("Each round you get the page you are on (its visible texts separated by [SEP]) and the actions "
              "available there: search where has_search_bar is true, click for a value among the clickables. Choose "
              "the options the customer asks for on the product page, then click Buy Now; buying ends the task.")
"""How the shop's pages and actions work: the env's first observation says it (once), before the grammar."""

PROMPT = Prompt(
    system="You are shopping in a web shop for a customer. Each round you think, then take exactly one action; "
           "you will see the page it leads to.",
    example=(
        ExampleStep(
            f"Observation:\nWebShop [SEP] Instruction: [SEP] {_INSTRUCTION} [SEP] Search\n\n"
            'Available Actions:\n{"has_search_bar": true, "clickables": ["search"]}',
            "Thought:\nI think I should search for the hoodie.\n\nAction:\nsearch[fleece lined hoodie large]",
            "search", {"keywords": "fleece lined hoodie large"},
        ),
        ExampleStep(
            f"Observation:\n{_HEAD} [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B0EXAMPLE1 [SEP] "
            "Norta Cozy Hoodie For Women, Fleece Lined, Kangaroo Pocket [SEP] $34.50 [SEP] B0EXAMPLE2 [SEP] "
            "Valen Zip-up Hoodie, Cotton Blend [SEP] $52.00\n\n"
            'Available Actions:\n{"has_search_bar": false, "clickables": ["back to search", "next >", '
            '"b0example1", "b0example2"]}',
            "Thought:\nI think the first one is fleece lined and under 40 dollars.\n\nAction:\nclick[B0EXAMPLE1]",
            "click", {"value": "B0EXAMPLE1"},
        ),
        ExampleStep(
            f"Observation:\n{_HEAD} [SEP] < Prev [SEP] size [SEP] medium [SEP] large [SEP] color [SEP] black "
            "[SEP] Norta Cozy Hoodie For Women, Fleece Lined, Kangaroo Pocket [SEP] Price: $34.50 [SEP] "
            "Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now\n\n"
            'Available Actions:\n{"has_search_bar": false, "clickables": ["back to search", "< prev", '
            '"description", "features", "reviews", "buy now", "medium", "large", "black"]}',
            "Thought:\nI think I should choose size large.\n\nAction:\nclick[large]",
            "click", {"value": "large"},
        ),
        ExampleStep(
            "Observation:\n(the same product page, with size large chosen)",
            "Thought:\nI think the hoodie matches; I buy it.\n\nAction:\nclick[Buy Now]",
            "buy_now", {},
        ),
    ),
)


# ------------------------------------------------- --protocol agentbench with a checkout

AGENTBENCH_MODULE = "webshop/__init__.py"
"""AgentBench's WebShop task module (v0.2, the text protocol), under ``src/server/tasks``."""

FIRST_PAGE_HEAD = "The initial observation:\n"
ACTIONS_HEAD = "\n\nAvailable Actions:\n"


def agentbench_conversation(root: Path) -> ScriptedConversation:
    """AgentBench's opening of a WebShop episode, read from the checkout at ``root``.

    AgentBench's loop: the instructions as a user turn, the model's acknowledgement, the
    one-shot's turns (pages and replies, each a literal), then the first page in the layout of
    every later turn (the page, then the available actions).

    Raises:
        AgentBenchCheckoutError: the module is missing or laid out otherwise.
    """
    module = TaskModule(root, AGENTBENCH_MODULE)
    head: list[tuple[str, str]] = []
    task = None
    for item in module.injected("start_sample"):
        text = item.content.literal
        if text is not None and task is None:
            head.append(("assistant" if item.role == "agent" else str(item.role), text))
        elif item.role == "user" and item.content.slots == 2:
            task = item.content
            break
    if task is None or len(head) < 2:
        raise module.missing("the instructions, the acknowledgement, the one-shot and the page turn in start_sample()")
    return ScriptedConversation(tuple(head), task, agentbench_task_values, str(module.path))


def agentbench_task_values(task: TaskSpec, first_observation: str) -> tuple[str, ...]:
    """The WebShop task turn's slots: the first page and its available actions, cut from the
    env's first observation (after its guide and grammar).

    Raises:
        AgentBenchCheckoutError: the observation does not hold the page in the env's layout.
    """
    _, found, page = first_observation.partition(FIRST_PAGE_HEAD)
    text, found_actions, actions = page.rpartition(ACTIONS_HEAD)
    if not found or not found_actions:
        raise AgentBenchCheckoutError("the WebShop env's first observation does not hold the page and its "
                                      "available actions in the layout the AgentBench task turn is cut from.")
    return (text, actions)
