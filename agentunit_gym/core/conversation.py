"""A benchmark's own opening of the conversation: :class:`ScriptedConversation`.

AgentBench's text protocol opens every episode the same way for a domain: its instructions as
a user turn, the model's acknowledgement, the one-shot example as user / assistant turns, then
the task in its own words. Under ``eval --protocol agentbench`` with an AgentBench checkout,
each domain builds one of these from the checkout
(:attr:`~agentunit_gym.core.domain.ProtocolPreset.conversation`), and
:class:`~agentunit_gym.wrappers.conversation.StartConversation` hands it to the agent: the
opening turns as ``info["chat_head"]`` and the task turn as the first observation.

Example (not run: it needs an AgentBench checkout)::

    conversation = get_domain("kg").protocols["agentbench"].conversation(Path("AgentBench"))
    conversation.messages()[:2]      # [{"role": "user", ...instructions}, {"role": "assistant", ...}]
    conversation.task_turn(task, first_observation)   # "A new question: ...\\nEntities: [...]"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentunit_gym.errors import AgentBenchCheckoutError
from agentunit_gym.tasks.agentbench_checkout import Template
from agentunit_gym.tasks.spec import TaskSpec

ROLES = ("user", "assistant")


@dataclass(frozen=True)
class ScriptedConversation:
    """The turns before the task and the task turn's template, read from a benchmark's source.

    Holds text and a module-level function only, so an env wrapped with it pickles.
    """

    head: tuple[tuple[str, str], ...]
    """``(role, content)`` turns before the task; roles ``user`` or ``assistant``, starting with
    ``user`` and alternating."""
    task: Template
    """The task turn: the benchmark's literal pieces around its slots."""
    task_values: Callable[[TaskSpec, str], tuple[str, ...]]
    """The task's values for :attr:`task`'s slots, from the task and the env's first
    observation (a module-level function)."""
    source: str
    """Where the text was read (the checkout's files), for the run's config and report."""

    def __post_init__(self) -> None:
        for index, (role, _) in enumerate(self.head):
            if role != ROLES[index % 2]:
                raise AgentBenchCheckoutError(f"turn {index} of a scripted conversation ({self.source}) is "
                                              f"{role!r}; the turns alternate user / assistant, from user.")

    def messages(self) -> list[dict[str, str]]:
        """The opening turns as OpenAI chat messages (no system message: AgentBench sends none)."""
        return [{"role": role, "content": content} for role, content in self.head]

    def task_turn(self, task: TaskSpec, first_observation: str) -> str:
        """The task as the benchmark words it (the first observation the agent reads)."""
        return self.task.fill(*self.task_values(task, first_observation))


ConversationBuilder = Callable[..., ScriptedConversation]
"""Builds a domain's :class:`ScriptedConversation` from a checkout's top folder (a ``Path``)."""


__all__ = ["ConversationBuilder", "ScriptedConversation"]
