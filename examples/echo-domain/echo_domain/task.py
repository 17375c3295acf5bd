"""An echo task: the word to say back."""

from agentunit_gym.tasks.spec import TaskSpec


class EchoTask(TaskSpec):
    """A word the agent must repeat."""

    word: str
    """The word."""
