"""What the trainers' loaders read from an exported row besides the conversation: the episode's
identity in the forms verl's agent loop hands to its tools and interactions, and the reward key.

verl's ``RLHFDataset`` passes every column of a row to its agent loop, with
``extra_info.tools_kwargs`` and ``extra_info.interaction_kwargs`` as keyword arguments of their
own. The loop named by the row's ``agent_name`` (``tool_agent``: verl's ``ToolAgentLoop``)
keeps only the configured tools that ``extra_info.tool_selection`` names (verl 0.9) and
creates the tool of each call with ``tools_kwargs[<tool>]["create_kwargs"]``; an interaction
(``interaction_kwargs``, whose ``name`` picks the interaction class; verl 0.9's own loops pass
it on unused) starts with the rest. What a tool or an interaction needs to play the row's
episode in an AgentUnit env is the same: the env id, the task id, the reset seed and the
backend (:func:`episode_kwargs`), so ``gym.make(env_id, backend=backend).reset(seed=seed,
options={"task_id": task_id})`` gives the row's first observation. No verl tool or
interaction class ships with agentunit-gym: these columns are what one would read.

The reward key (:func:`reward_model`): ``style`` ``rule`` when the gold answer can be compared
with the agent's reply text (DB answers), ``env`` when only the env can score the episode; the
``ground_truth`` is the task's gold answer as JSON text when it has one (DB SELECT tasks, KG),
else ``""`` (OS check scripts, DB table hashes, WebShop purchases grade the state an episode
leaves, which no text holds).

Example:
    >>> from agentunit_gym.tasks.spec import AnswerKey
    >>> reward_model(AnswerKey('["-3.2"]', in_reply=True)), reward_model(None)
    ({'style': 'rule', 'ground_truth': '["-3.2"]'}, {'style': 'env', 'ground_truth': ''})
    >>> episode = episode_kwargs("AgentUnit/DB-v0", "db-weather-03", seed=7, split="test", backend="sqlite")
    >>> tools_kwargs(["execute_sql", "submit_answer"], episode)["submit_answer"]["create_kwargs"]["task_id"]
    'db-weather-03'
    >>> interaction_kwargs(episode)["name"], interaction_kwargs(episode)["seed"]
    ('agentunit_gym', 7)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentunit_gym.tasks.spec import AnswerKey

VERL_AGENT_NAME = "tool_agent"
"""The ``agent_name`` of exported rows: verl's ``ToolAgentLoop`` (tool calls and interaction
turns in one loop); ``export_run(..., agent_name=...)`` names another registered loop."""

INTERACTION_NAME = "agentunit_gym"
"""``extra_info.interaction_kwargs["name"]``: the name a verl interaction config gives the
class that plays AgentUnit episodes (verl requires the key when interactions are on)."""


def episode_kwargs(env_id: str, task_id: str, *, seed: int | None, split: str, backend: str) -> dict[str, Any]:
    """The episode's identity, as a tool or interaction needs it to play the episode again."""
    return {"env_id": env_id, "task_id": task_id, "seed": seed, "split": split, "backend": backend}


def tool_names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of tool schemas, in OpenAI's function form or bare (``{"name": ...}``)."""
    names = []
    for schema in tools:
        function = schema.get("function")
        name = function.get("name") if isinstance(function, Mapping) else schema.get("name")
        if isinstance(name, str) and name:
            names.append(name)
    return names


def tools_kwargs(names: Sequence[str], episode: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """verl's ``extra_info.tools_kwargs``: per tool the agent was shown, ``create_kwargs`` holding the
    episode (every tool of an episode acts on one env, so each gets the same)."""
    return {name: {"create_kwargs": dict(episode)} for name in names}


def interaction_kwargs(episode: Mapping[str, Any]) -> dict[str, Any]:
    """verl's ``extra_info.interaction_kwargs``: the interaction's name, then the episode."""
    return {"name": INTERACTION_NAME, **episode}


def reward_model(key: AnswerKey | None) -> dict[str, str]:
    """verl's ``reward_model`` column for a task whose answer key is ``key`` (see the module docstring)."""
    if key is None:
        return {"style": "env", "ground_truth": ""}
    return {"style": "rule" if key.in_reply else "env", "ground_truth": key.text}


__all__ = ["INTERACTION_NAME", "VERL_AGENT_NAME", "episode_kwargs", "interaction_kwargs", "reward_model",
           "tool_names", "tools_kwargs"]
