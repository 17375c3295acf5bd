"""The echo domain: the agent is shown a word and must say it back.

A complete agentunit-gym domain in three small files: this description, the task model
(``task.py``) and the env (``env.py``), plus a bundled suite (``suite/``).
"""

from pathlib import Path

from agentunit_gym.core.domain import BackendSpec, Domain, EnvSpec, ExampleStep, Prompt, ReportSection
from echo_domain.task import EchoTask

DOMAIN = Domain(
    name="echo",
    title="Echo",
    description="The agent reads a word (it may look again) and says it back.",
    envs=(EnvSpec("EchoCorp/Echo-v0", "echo_domain.env:EchoEnv"),),
    step_limit=4,
    backends=(BackendSpec("inline", "in the env's process, no daemon", embedded=True),),
    task_model=EchoTask,
    suite=Path(__file__).parent / "suite",
    prompt=Prompt(
        system="You repeat words. Each turn you take exactly one action.",
        example=(
            ExampleStep("Task: say the word 'pear'.", "Act: say(pear)", "say", {"word": "pear"}),
        ),
    ),
    report_sections=(ReportSection("Echo", ("success_rate", "step_efficiency"), "Did the agent say the word?"),),
)
