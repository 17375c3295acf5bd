"""One protocol switch: what a named evaluation protocol sets for an env, decided in one place.

A protocol is a benchmark's way of running an episode. ``agentunit`` (the default) is ours:
feedback on an invalid reply and go on, each task's own turn limit, the env's own caps,
tools and prompt. ``agentbench`` is AgentBench's: an invalid reply ends the episode (where the
benchmark's loop ends it), the domain's AgentBench turn limit for every task, AgentBench's
observation caps and, with a checkout of AgentBench, its own opening of the conversation.
``agentbench-fc`` is the same with AgentBench FC's tool names, and only tool calls are actions.

What a protocol changes for one env id is :func:`protocol_setup`'s :class:`ProtocolSetup`: the
protocol's generic settings plus the domain's :class:`~agentunit_gym.core.domain.ProtocolPreset`.
:func:`~agentunit_gym.wrappers.stack.make_eval_env` applies it (``protocol="agentbench"``), and
so every caller gets the same episode from one argument: ``agentunit-gym eval --protocol``, the
env server and the MCP server (``--protocol``), and the integrations (``protocol=``).

Example:
    >>> setup = protocol_setup("AgentUnit/DB-v0", "agentbench-fc")
    >>> setup.env_options["max_steps"], setup.invalid_policy, setup.tool_calls_only
    (15, 'terminate', True)
    >>> [alias.name for alias in setup.tools]
    ['execute_sql', 'commit_final_answer']
    >>> protocol_setup("AgentUnit/DB-v0").env_options   # the default protocol changes nothing
    {}
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import gymnasium as gym

from agentunit_gym.core import registry
from agentunit_gym.core.actions import ActionIssue
from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.domain import ToolAlias
from agentunit_gym.core.env import InvalidPolicy
from agentunit_gym.errors import ConfigError

ProtocolName = Literal["agentunit", "agentbench", "agentbench-fc"]
"""The evaluation protocols (``--protocol``, ``make_eval_env(protocol=...)``)."""

PROTOCOLS: tuple[str, ...] = get_args(ProtocolName)

DEFAULT_PROTOCOL: ProtocolName = "agentunit"

TOOL_CALL_PROTOCOLS = frozenset({"agentbench-fc"})
"""Protocols under which only tool calls are actions (:meth:`~agentunit_gym.core.env.AgentEnv.require_tool_calls`)."""


def default_invalid_policy(protocol: str) -> InvalidPolicy:
    """What an invalid reply does under ``protocol`` unless told otherwise: ``continue`` under
    ``agentunit``, ``terminate`` (AgentBench's) under the AgentBench protocols."""
    return "continue" if protocol == DEFAULT_PROTOCOL else "terminate"


@dataclass(frozen=True)
class ProtocolSetup:
    """What one protocol sets for one env id (made by :func:`protocol_setup`)."""

    protocol: str
    """The protocol's name."""
    env_options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make``: the domain's AgentBench turn limit (``max_steps``)
    and the preset's own (an observation cap ...). Options a caller gives win."""
    invalid_policy: InvalidPolicy = "continue"
    """The invalid-reply policy the protocol runs with unless the caller names one."""
    ending_issues: frozenset[str] | None = None
    """The invalid replies that may end an episode under the ``terminate`` policy (by
    ``info["action_error"]["issue"]``); None for every one."""
    tools: tuple[ToolAlias, ...] = ()
    """The tool names agents see instead of the env's own (:class:`~agentunit_gym.wrappers.aliases.RenameTools`)."""
    tool_calls_only: bool = False
    """Only tool calls are actions (:meth:`~agentunit_gym.core.env.AgentEnv.require_tool_calls`)."""
    conversation: ScriptedConversation | None = None
    """The benchmark's opening of the conversation, read from its checkout; None for the env's own."""

    def options_under(self, explicit: Mapping[str, Any]) -> dict[str, Any]:
        """``explicit`` ``gym.make`` options with the protocol's added where they name none."""
        return {**self.env_options, **explicit}

    def wrap_outside(self, env: gym.Env[str, str]) -> gym.Env[str, str]:
        """Put what the protocol changes outside the stack over ``env``: the renamed tools (the
        outermost wrapper, so every layer below sees the env's own names) and tool-calls-only mode."""
        if self.tools:
            from agentunit_gym.wrappers.aliases import RenameTools

            env = RenameTools(env, self.tools)
        if self.tool_calls_only:
            from agentunit_gym.wrappers.info import agent_env

            agent_env(env).require_tool_calls()
        return env


def protocol_setup(env_id: str, protocol: str = DEFAULT_PROTOCOL, *,
                   agentbench_root: str | Path | None = None) -> ProtocolSetup:
    """What ``protocol`` sets for ``env_id``: the protocol's generic settings and its domain's preset.

    ``agentunit`` sets nothing. The AgentBench protocols set the domain's AgentBench turn limit
    for every task (a task's own ``max_steps`` no longer counts), the ``terminate`` policy, and
    what the domain's :class:`~agentunit_gym.core.domain.ProtocolPreset` adds (observation caps,
    the replies that end an episode, the tool names, the opening of the conversation). Under a
    function-calling protocol a reply without a tool call (``no_call``) never ends an episode,
    in any domain: AgentBench FC answers it and its loop goes on. An env id no registered domain
    owns gets the generic settings only.

    Args:
        env_id: a full env id (``AgentUnit/DB-v0``).
        protocol: ``agentunit``, ``agentbench`` or ``agentbench-fc``.
        agentbench_root: an AgentBench checkout (v0.2, the text protocol) whose prompts open each
            episode, for the domains whose preset reads one; None keeps the env's own prompt.

    Raises:
        ConfigError: an unknown protocol, or a checkout under ``agentunit``.
        AgentBenchCheckoutError: the checkout's task module is missing or laid out otherwise.
    """
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}.")
    if protocol == DEFAULT_PROTOCOL:
        if agentbench_root is not None:
            raise ConfigError("an AgentBench checkout gives AgentBench's prompts to protocol 'agentbench'; "
                              "name that protocol, or drop the checkout.")
        return ProtocolSetup(protocol)
    domain = registry.domain_of_env(env_id)
    preset = domain.protocols.get(protocol) if domain is not None else None
    options: dict[str, Any] = {"max_steps": domain.step_limit} if domain is not None else {}
    if preset is not None:
        options.update(preset.env_options)
    issues = preset.ending_issues if preset is not None else None
    tool_calls_only = protocol in TOOL_CALL_PROTOCOLS
    if tool_calls_only:
        issues = (frozenset(i.value for i in ActionIssue) if issues is None else issues) - {ActionIssue.NO_CALL.value}
    conversation = (scripted_conversation(domain.name, protocol, str(agentbench_root))
                    if domain is not None and agentbench_root is not None else None)
    return ProtocolSetup(protocol, options, default_invalid_policy(protocol), issues,
                         preset.tools if preset is not None else (), tool_calls_only, conversation)


@functools.lru_cache(maxsize=16)
def scripted_conversation(domain: str, protocol: str, root: str) -> ScriptedConversation | None:
    """The conversation ``domain`` opens an episode with under ``protocol``, read from the
    benchmark checkout at ``root`` (read once per process); None when the domain's preset
    of that protocol has none (its chat agent keeps our own prompt).

    Raises:
        AgentBenchCheckoutError: the checkout's task module is missing or laid out otherwise.
    """
    preset = registry.get_domain(domain).protocols.get(protocol)
    if preset is None or preset.conversation is None:
        return None
    return preset.conversation(Path(root))


__all__ = ["DEFAULT_PROTOCOL", "PROTOCOLS", "TOOL_CALL_PROTOCOLS", "ProtocolName", "ProtocolSetup",
           "default_invalid_policy", "protocol_setup", "scripted_conversation"]
