"""What a chat agent is told about the OS domain: the system text and one worked example."""

from __future__ import annotations

from agentunit_gym.core.domain import ExampleStep, Prompt

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
