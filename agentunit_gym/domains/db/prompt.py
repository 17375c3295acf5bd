"""What a chat agent is told about the DB domain: the system text and one worked example."""

from __future__ import annotations

from agentunit_gym.core.domain import ExampleStep, Prompt

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
