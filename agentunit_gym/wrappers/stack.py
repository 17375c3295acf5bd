"""The standard evaluation stack in one call: :func:`make_eval_env`.

Order, from the env outwards (each wrapper sees what the ones below it produced)::

    AgentUnit env (gym.make: PassiveEnvChecker, OrderEnforcing, EndTruncatedEpisode)
      StartConversation a benchmark's opening turns and task turn (only when given one)
      ClassifyActions   classify every reply first, from the env's own info
      InjectTraps       plant and inject a trap; judge actions and state
      DetectLoops       flag (or end on) repeated actions
      LimitEpisode      step and wall-clock limits (TLE)
      LimitContext      count what the agent reads, trap text and hints included (CLE)
      RecordTrace       records exactly what the agent saw and did
      RenameTools       a protocol's tool names (only under a protocol that renames tools)

``protocol=`` (``agentunit``, ``agentbench``, ``agentbench-fc``) applies a benchmark's settings
in one argument (:mod:`agentunit_gym.wrappers.protocols`).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentunit_gym.core.conversation import ScriptedConversation
from agentunit_gym.core.env import InvalidPolicy
from agentunit_gym.errors import ConfigError
from agentunit_gym.wrappers.classify import ClassifyActions
from agentunit_gym.wrappers.context import LimitContext, TokenCounter
from agentunit_gym.wrappers.conversation import StartConversation
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.limits import LimitEpisode
from agentunit_gym.wrappers.loops import DetectLoops, LoopAction
from agentunit_gym.wrappers.protocols import DEFAULT_PROTOCOL, ProtocolName, protocol_setup
from agentunit_gym.wrappers.trace import RecordTrace
from agentunit_gym.wrappers.traps import InjectTraps, TrapLibrary, load_trap_library


def make_eval_env(
    env_id: str,
    *,
    protocol: ProtocolName = DEFAULT_PROTOCOL,
    agentbench_root: str | Path | None = None,
    max_steps: int | None = None,
    max_seconds: float | None = None,
    max_context_tokens: int | None = None,
    token_counter: str | TokenCounter | None = "approx",
    invalid_policy: InvalidPolicy | None = None,
    max_invalid: int | None = None,
    ending_issues: Collection[str] | None = None,
    loop_repeats: int = 3,
    loop_max_cycle: int = 3,
    on_loop: LoopAction = "flag",
    traps: bool | str | Path | TrapLibrary | list[str] | None = None,
    trap_rate: float = 0.0,
    trap_seed: int | None = None,
    trace_dir: str | Path | None = None,
    trace_max_chars: int | None = 4000,
    trace_metadata: dict[str, Any] | None = None,
    conversation: ScriptedConversation | None = None,
    **env_options: Any,
) -> gym.Env[str, str]:
    """Make an AgentUnit env wrapped in the standard evaluation stack (see the module docstring).

    Example:
        >>> import tempfile, agentunit_gym
        >>> folder = tempfile.TemporaryDirectory()
        >>> env = agentunit_gym.make_eval_env("AgentUnit/DB-v0", backend="sqlite", trap_rate=0.2,
        ...                                   trap_seed=1, max_context_tokens=8192, trace_dir=folder.name)
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> info["invalid_policy"], info["step_limit"], info["max_context_tokens"], info["context_counter"]
        ('continue', 15, 8192, 'approx')
        >>> env.close(); folder.cleanup()

    AgentBench's protocol, in one argument (its turn limit, ending on an invalid reply, its caps)::

        >>> env = agentunit_gym.make_eval_env("AgentUnit/DB-v0", protocol="agentbench", backend="sqlite")
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> info["invalid_policy"], info["step_limit"]
        ('terminate', 15)
        >>> env.close()

    Args:
        env_id: a registered id (``AgentUnit/OS-v0`` ...).
        protocol: ``agentunit`` (ours, the default), ``agentbench`` or ``agentbench-fc``: the
            protocol's settings and the domain's preset for it
            (:func:`~agentunit_gym.wrappers.protocols.protocol_setup`); the options given here win.
        agentbench_root: an AgentBench checkout (v0.2) whose prompts open each episode under
            ``protocol="agentbench"``; None keeps the env's own prompt.
        max_steps: turn limit; None for the task's own, else the domain's (AgentBench's limit
            under an AgentBench protocol); also passed to the env.
        max_seconds: wall-clock limit per episode, None for none.
        max_context_tokens: the agent's context size; None leaves out the context limit.
        token_counter: counter spec for :class:`LimitContext` (``approx``, ``tiktoken``, ``tokenizers:<path>``).
        invalid_policy: ``continue`` (AgentUnit) or ``terminate`` (AgentBench); None for the
            protocol's (``continue`` under ``agentunit``, else ``terminate``).
        max_invalid: end after this many invalid replies (overrides the policy).
        ending_issues: the ``action_error`` issues that may end the episode (None: all), the
            domain's :attr:`~agentunit_gym.core.domain.ProtocolPreset.ending_issues` under a protocol
            when None.
        loop_repeats, loop_max_cycle: loop detection thresholds.
        on_loop: ``flag`` or ``end`` (end as TLE).
        traps: None/True for the domain's bundled library when it has one (False: no trap
            wrapper at all), a library or YAML path, or a list of trap ids of the bundled library.
        trap_rate: probability of a trap per episode (0: never; the wrapper still flags
            destructive actions).
        trap_seed: seed of the trap draws.
        trace_dir: where traces are written; None keeps them in ``info["trace"]`` only.
        trace_max_chars: cap on recorded observations and replies; None records them in full.
        trace_metadata: extra fields for every trace.
        conversation: a benchmark's opening of the conversation, put right over the env by
            :class:`StartConversation`; None for the protocol's (``agentbench`` with
            ``agentbench_root``), else none.
        **env_options: passed to ``gym.make`` (``backend=``, ``tasks=`` ...).

    Returns:
        The wrapped env.

    Raises:
        ConfigError: bad options (an unknown protocol ...), or traps asked for on a domain without a library.
        AgentBenchCheckoutError: ``agentbench_root`` is not laid out as AgentBench's v0.2 release.
    """
    setup = protocol_setup(env_id, protocol, agentbench_root=agentbench_root)
    if max_steps is not None:
        env_options["max_steps"] = max_steps
    env_options = setup.options_under(env_options)
    max_steps = env_options.get("max_steps")
    if conversation is None:
        conversation = setup.conversation
    env: gym.Env[str, str] = gym.make(env_id, **env_options)
    try:
        domain = agent_env(env).domain
        if conversation is not None:
            env = StartConversation(env, conversation)
        env = ClassifyActions(env, policy=invalid_policy or setup.invalid_policy, max_invalid=max_invalid,
                              ending_issues=setup.ending_issues if ending_issues is None else ending_issues)
        library = _trap_library(domain, traps)
        if library is not None:
            ids = traps if isinstance(traps, list) else None
            env = InjectTraps(env, library=library, rate=trap_rate, seed=trap_seed, traps=ids)
        env = DetectLoops(env, repeats=loop_repeats, max_cycle=loop_max_cycle, on_loop=on_loop)
        env = LimitEpisode(env, max_steps=max_steps, max_seconds=max_seconds)
        if max_context_tokens is not None:
            env = LimitContext(env, max_tokens=max_context_tokens, counter=token_counter)
        env = RecordTrace(env, directory=trace_dir, env_id=env_id, max_chars=trace_max_chars,
                          metadata=trace_metadata)
        env = setup.wrap_outside(env)
    except BaseException:
        env.close()  # do not leak the container or database a half-built stack holds
        raise
    return env


def make_protocol_env(env_id: str, protocol: ProtocolName | None = None, *,
                      agentbench_root: str | Path | None = None, **env_options: Any) -> gym.Env[str, str]:
    """The env a server or a trainer's adapter plays: the bare env (``gym.make``) without a
    protocol, the standard stack under ``protocol`` with one (:func:`make_eval_env`, the same
    episodes ``agentunit-gym eval --protocol`` plays).

    Raises:
        ConfigError: an unknown protocol, a checkout without a protocol, or bad options.
    """
    if protocol is None:
        if agentbench_root is not None:
            raise ConfigError("an AgentBench checkout gives AgentBench's prompts to protocol 'agentbench'; "
                              "name that protocol, or drop the checkout.")
        return gym.make(env_id, **env_options)
    return make_eval_env(env_id, protocol=protocol, agentbench_root=agentbench_root, **env_options)


def _trap_library(domain: str, traps: bool | str | Path | TrapLibrary | list[str] | None) -> TrapLibrary | None:
    if traps is False:
        return None
    if isinstance(traps, TrapLibrary):
        return traps
    if isinstance(traps, (str, Path)):
        return load_trap_library(traps)
    try:
        return load_trap_library(domain)
    except ConfigError:
        if traps is None:
            return None  # a domain without a library yet: no traps, no error
        raise
