"""What a chat agent is told about the WebShop domain: the system text and one worked example.

The example is AgentBench's one-shot in form (search, open a product, choose an option,
buy), written over our own catalog's pages.
"""

from __future__ import annotations

from agentunit_gym.core.domain import ExampleStep, Prompt

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
            "Rating: 4.3 [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now\n\n"
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
