"""Agents: the protocol the evaluator drives, and the built-in agents.

An agent is anything with ``act(observation, info) -> str``, synchronous or ``async def``
(the evaluator awaits an asynchronous agent on its event loop, so hundreds of episodes can
wait on a model from one process; a synchronous one runs in a thread). Optionally it has
``reset(task_info)`` (either kind too), called with the env's reset ``info`` before each episode, and it
reports usage by returning an :class:`~agentunit_gym.core.trace.AgentReply` (a ``str``
carrying a :class:`~agentunit_gym.core.trace.Usage`). A plain function
``f(observation, info) -> str`` is an agent too.

The evaluator runs episodes concurrently, so it asks an :data:`AgentFactory` for a fresh
agent per concurrent slot: stateful agents (a chat history, a replay queue) never share
state between episodes that run at the same time.

Built-ins, by the name ``--agent`` takes:

- ``oracle``: replays the task's reference solution. It reads ``info["reference_actions"]``
  (the reference steps already written in the env's grammar), which the evaluator adds to
  the reset ``info`` only for agents whose ``needs_reference`` attribute is true.
- ``random``: well-formed but random JSON tool calls (a floor to compare against).
- ``openai:<model>``: an OpenAI-compatible chat model (see :mod:`agentunit_gym.eval.agents.openai_agent`).
- ``<module>:<attr>``: a class (instantiated per slot, with no arguments) or a callable.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agentunit_gym.core.reference import OutputReply
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.agents.info import REFERENCE_KEY as REFERENCE_KEY  # its old home, kept for imports
from agentunit_gym.eval.agents.info import reference_actions, reset_seed


@runtime_checkable
class Agent(Protocol):
    """What the evaluator drives: one reply per observation."""

    def act(self, observation: str, info: dict[str, Any]) -> str | Awaitable[str]:
        """The agent's reply to ``observation`` (an :class:`AgentReply` to report usage);
        ``async def act`` for an asynchronous agent."""
        ...


AgentFactory = Callable[[], Agent]
"""Makes one fresh agent; the evaluator calls it once per concurrent slot."""


def reset_agent(agent: Agent, info: dict[str, Any]) -> None:
    """Call ``agent.reset(info)`` if the agent has one (run to completion when it is ``async``)."""
    reset = getattr(agent, "reset", None)
    if callable(reset):
        result = reset(info)
        if inspect.isawaitable(result):
            _run_awaitable(result)


async def reset_agent_async(agent: Agent, info: dict[str, Any], pool: Executor) -> None:
    """Call ``agent.reset(info)`` if the agent has one: awaited when it is ``async``, else in ``pool``."""
    reset = getattr(agent, "reset", None)
    if not callable(reset):
        return
    if inspect.iscoroutinefunction(reset):
        await reset(info)
        return
    result = await asyncio.get_running_loop().run_in_executor(pool, reset, info)
    if inspect.isawaitable(result):
        await result


async def act_async(agent: Agent, observation: str, info: dict[str, Any], pool: Executor) -> str:
    """The agent's reply from an event loop: awaited when ``act`` is ``async``, else run in ``pool``
    (a synchronous ``act`` blocks, and the loop drives every other episode meanwhile)."""
    if inspect.iscoroutinefunction(agent.act):
        reply = await agent.act(observation, info)
    else:
        reply = await asyncio.get_running_loop().run_in_executor(pool, agent.act, observation, info)
        if inspect.isawaitable(reply):  # a plain function that returned a coroutine
            reply = await reply
    # An AgentReply (a str subclass carrying usage) stays as it is: str() would drop the usage.
    return reply if isinstance(reply, str) else str(reply)


def act_blocking(agent: Agent, observation: str, info: dict[str, Any]) -> str:
    """The agent's reply from a thread with no event loop (a training loop's agent threads, as in
    examples/rollouts.py): an ``async`` agent's reply is run to completion on a loop of this call's own."""
    reply = agent.act(observation, info)
    if inspect.isawaitable(reply):
        reply = _run_awaitable(reply)
    return reply if isinstance(reply, str) else str(reply)


def _run_awaitable(awaitable: Awaitable[Any]) -> Any:
    async def wait() -> Any:
        return await awaitable

    return asyncio.run(wait())


def needs_reference(agent: Agent) -> bool:
    """Whether the agent asked for the reference solution in its reset info."""
    return bool(getattr(agent, "needs_reference", False))


class OracleAgent:
    """Replays the current task's reference solution, one step per turn.

    Once the solution is spent (it should not be: the last step commits), it repeats the
    last step, so a broken reference shows up as a failed episode, not a crash. A step whose
    text depends on the episode (an :class:`~agentunit_gym.core.reference.OutputReply`, e.g.
    answering with what AgentBench's example script printed) is completed from the
    observation the oracle is given.
    """

    needs_reference = True
    name = "oracle"

    def __init__(self) -> None:
        self._queue: list[str] = []
        self._last = ""

    def reset(self, info: dict[str, Any]) -> None:
        """Take the reference solution of the task that starts.

        Raises:
            ConfigError: the info has no reference solution (the evaluator was not asked for it),
                or it is not a list of ``str``.
        """
        self._queue = reference_actions(info)
        self._last = ""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self._queue:
            step = self._queue.pop(0)
            self._last = step.complete(observation) if isinstance(step, OutputReply) else step
        return self._last


_WORD = re.compile(r"[A-Za-z0-9_./-]{2,}")
_FALLBACK_WORDS = ("1", "0", "x", "yes", "no", "done")


class RandomAgent:
    """Random but well-formed JSON tool calls: a floor to compare agents against.

    Each turn it picks one of the env's tools uniformly and fills every parameter with a
    word drawn from the instruction and the last observation. Seeded by ``info["seed"]``
    when the evaluator gives one, so runs repeat.

    Args:
        seed: the seed used when the reset info carries none.
    """

    name = "random"

    def __init__(self, seed: int | None = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self._words: list[str] = list(_FALLBACK_WORDS)

    def reset(self, info: dict[str, Any]) -> None:
        """Reseed from ``info["seed"]`` when there is one, and take the instruction's words.

        Raises:
            ConfigError: ``info["seed"]`` is not an integer.
        """
        seed = reset_seed(info)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._words = list(dict.fromkeys(_WORD.findall(str(info.get("instruction", ""))))) or list(_FALLBACK_WORDS)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        tools = info.get("tools") or []
        if not tools:
            return "I do not know which tools there are."
        tool = tools[int(self._rng.integers(len(tools)))]["function"]
        words = self._words + _WORD.findall(observation)[:50]
        arguments: dict[str, Any] = {}
        for pname, schema in tool.get("parameters", {}).get("properties", {}).items():
            word = words[int(self._rng.integers(len(words)))]
            kind = schema.get("type")
            if kind == "array":
                arguments[pname] = [word]
            elif kind == "integer":
                arguments[pname] = int(self._rng.integers(0, 10))
            elif kind == "number":
                arguments[pname] = float(self._rng.integers(0, 10))
            elif kind == "boolean":
                arguments[pname] = bool(self._rng.integers(2))
            else:
                arguments[pname] = word
        return json.dumps({"name": tool["name"], "arguments": arguments})


class _CallableAgent:
    """Adapts a plain function ``f(observation, info) -> str`` to the protocol."""

    def __init__(self, fn: Callable[[str, dict[str, Any]], str]) -> None:
        self._fn = fn
        self.name = getattr(fn, "__name__", "callable")

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self._fn(observation, info)


def import_agent(spec: str) -> Any:
    """The object ``spec`` names: ``module:attr`` (the current folder first on the path, as
    ``python -m`` and pytest do) or ``path/to/file.py:attr``.

    Raises:
        ConfigError: the file or module is not found or fails to import, or lacks the attribute;
            the message says where it looked.
    """
    source, _, attr = spec.rpartition(":")
    if not source or not attr:
        raise ConfigError(f"agent {spec!r} must be module:attr or file.py:attr.")
    cwd = os.getcwd()
    if source.endswith(".py") or "/" in source or os.sep in source:
        path = Path(source).expanduser()
        if not path.is_file():
            looked = path if path.is_absolute() else Path(cwd) / path
            raise ConfigError(f"agent {spec!r}: no file {path} (looked for {looked}).")
        module_name = f"_agentunit_user_agent_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigError(f"agent {spec!r}: {path} is not a Python file.")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        # Its own folder on the path, so the file can import its neighbours.
        folder = str(path.resolve().parent)
        added = folder not in sys.path
        if added:
            sys.path.insert(0, folder)
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module may raise anything on import
            sys.modules.pop(module_name, None)
            raise ConfigError(f"agent {spec!r}: importing {path} raised {type(exc).__name__}: {exc}") from exc
        where = str(path)
    else:
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(source)
        except ModuleNotFoundError as exc:
            if exc.name is not None and source.startswith(exc.name):
                raise ConfigError(
                    f"agent {spec!r}: cannot import {source!r}: no such module (looked in the current folder "
                    f"{cwd} and on sys.path). Run from the folder holding {source.split('.')[0]}.py, or pass the file: "
                    f"--agent ./{source.replace('.', '/')}.py:{attr}.") from exc
            raise ConfigError(f"agent {spec!r}: importing {source!r} failed: {exc}.") from exc
        except Exception as exc:  # noqa: BLE001 - the user's module may raise anything on import
            raise ConfigError(f"agent {spec!r}: importing {source!r} raised {type(exc).__name__}: {exc}") from exc
        where = getattr(module, "__file__", None) or source
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"agent {spec!r}: {where} has no attribute {attr!r}.")
        target = getattr(target, part)
    return target


def resolve_agent(
    spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    check_endpoint: bool = False,
    **options: Any,
) -> tuple[str, AgentFactory]:
    """Turn an ``--agent`` value into a label and a factory.

    Args:
        spec: ``oracle``, ``random``, ``openai:<model>``, ``<module>:<attr>`` (imported with the
            current folder on the path, as ``python -m`` does) or ``<file.py>:<attr>``.
        base_url: the OpenAI-compatible endpoint (for ``openai:``).
        api_key_env: the environment variable holding the key (for ``openai:``).
        check_endpoint: for ``openai:``, send one cheap request now and fail when the endpoint
            does not answer (:func:`~agentunit_gym.eval.agents.openai_agent.check_openai_endpoint`).
        **options: passed to :class:`~agentunit_gym.eval.agents.openai_agent.OpenAIChatAgent`.

    Returns:
        ``(label, factory)``.

    Raises:
        ConfigError: an unknown name, a module that does not import, an attribute that is
            neither a class nor a callable.
        EndpointError: ``check_endpoint`` and the endpoint does not answer.
    """
    if spec == "oracle":
        return "oracle", OracleAgent
    if spec == "random":
        return "random", RandomAgent
    if spec.startswith("openai:"):
        from agentunit_gym.eval.agents.openai_agent import OpenAIChatAgent, OpenAIConfig, check_openai_endpoint

        model = spec.split(":", 1)[1]
        if not model:
            raise ConfigError("openai agents are written openai:<model>, e.g. openai:gpt-4o-mini.")
        settings: dict[str, Any] = {"model": model, "api_key_env": api_key_env, **options}
        if base_url:
            settings["base_url"] = base_url
        config = OpenAIConfig(**settings)
        config.api_key()  # fail now, not in the first episode, when the key is missing
        if check_endpoint:
            check_openai_endpoint(config)
        return f"openai:{model}", lambda: OpenAIChatAgent(config)
    if ":" not in spec:
        raise ConfigError(
            f"unknown agent {spec!r}: use oracle, random, openai:<model>, module:attr or ./file.py:attr for your own."
        )
    target = import_agent(spec)
    if isinstance(target, type):
        cls = target
        return spec, lambda: cls()
    if hasattr(target, "act"):
        instance = target
        return spec, lambda: instance  # an agent object given as is: shared, so it should be stateless
    if callable(target):
        fn = target
        return spec, lambda: _CallableAgent(fn)
    raise ConfigError(f"agent {spec!r} is neither a class, an object with act(), nor a callable.")
