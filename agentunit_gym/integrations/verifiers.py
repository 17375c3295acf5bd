"""AgentUnit envs as a verifiers environment (verifiers 0.4, the ``verifiers.v1`` API).

verifiers splits an environment into a *taskset* (the rows every rollout starts from), an
*env* (how one task becomes one episode: ``run(task, agents)``) and a *harness* (the
program that calls the model). Here:

- :class:`AgentUnitTaskset` yields one task per AgentUnit task of an env id (one split, or
  all): its prompt is the opening conversation :class:`~agentunit_gym.core.chat.ChatTranscript`
  builds in ``react`` style (the system text with the grammar as the system prompt, then
  the domain's worked example and the task), the same messages the evaluator sends a model.
- :class:`AgentUnitEnv` plays the episode: it resets the AgentUnit env on the task, takes
  each model reply from the harness, steps the env with it and sends the observation back
  as the next user turn, until the env's episode ends (or the agent's run does: the
  episode then ends as TASK_LIMIT). The rubric is the env's score: the reward
  ``agentunit_score`` (weight 1) is the env's terminal reward (OS/DB success, KG F1,
  WebShop reward), and the metrics ``success``, ``steps`` and every numeric score
  component (``score/<name>``) go beside it; ``trace.info["agentunit"]`` keeps the finish
  reason and the whole score.
- :class:`AgentUnitHarness` is verifiers' tool-less chat loop (``null``): the model's
  replies are text, which the env parses (ReAct, or a JSON tool call in the text). On the
  local subprocess runtime it runs with this Python, so a rollout needs no network (no uv, no
  packages fetched).

A failure is never a score (:func:`agent_run_failure`): a model endpoint that fails (an HTTP
error, a timeout) or a harness that dies leaves verifiers' typed error on the trace
(``trace.errors``, ``trace.ok`` false, ``episode.ok`` false) and the reward ``None``, with
``trace.info["agentunit"]["finish_reason"] == "error"``; a backend that fails under the env
raises out of the episode (verifiers records it on the trace and on ``episode.errors``). A
context overflow is the agent's own end, scored as the evaluator scores it (CONTEXT_LIMIT).

verifiers finds a taskset, its env and its harness by *id*, a top-level module name: ours is
:data:`TASKSET_ID` (``agentunit-gym-verifiers``, the module ``agentunit_gym_verifiers``
shipped in this distribution), so ``vf eval``/``prime-rl`` configs name it too.

Example:

    >>> from agentunit_gym.integrations.verifiers import load_environment
    >>> env = load_environment("DB-v0", split="test", backend="sqlite")
    >>> tasks = list(env.taskset)            # one per task of the split
    >>> {task.data.info["split"] for task in tasks}, sorted(tasks[0].data.info)
    ({'test'}, ['env_id', 'split', 'task_id'])

Raises on import:
    MissingDependencyError: ``verifiers`` is not installed (``pip install "agentunit-gym[integrations]"``).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import sys
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from pydantic import Field

from agentunit_gym.core.chat import ChatStyle, ChatTranscript
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.registry import env_ids, full_env_id
from agentunit_gym.errors import INFRA_ERRORS, AgentUnitError, ConfigError, MissingDependencyError
from agentunit_gym.eval.agents.model_errors import ModelAPIError, context_limit_message
from agentunit_gym.integrations import INTEGRATIONS_EXTRA
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.protocols import ProtocolName
from agentunit_gym.wrappers.registration import register_envs
from agentunit_gym.wrappers.stack import make_protocol_env

try:
    import verifiers.v1 as vf
    from verifiers.v1.configs.env import TimeoutConfig
    from verifiers.v1.harnesses.null import NullHarness
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise MissingDependencyError(str(exc.name or "verifiers"), INTEGRATIONS_EXTRA,
                                 "agentunit_gym.integrations.verifiers (AgentUnit envs in verifiers)") from exc

TASKSET_ID = "agentunit-gym-verifiers"
"""The verifiers id of the taskset, env and harness (the module ``agentunit_gym_verifiers``)."""

REWARD_NAME = "agentunit_score"
"""The reward verifiers records: the env's terminal reward."""

EPISODE_DEADLINE_S = 1800.0
"""Default deadline of one episode (verifiers' ``--env.timeout.episode``): a model that never
answers ends the episode with a timeout instead of holding a rollout slot forever."""

STYLE: ChatStyle = "react"
"""The conversation style: the harness sends plain text replies, which the env parses."""


class AgentUnitTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]  # verifiers ships no type hints
    """Which AgentUnit tasks to play (``--env.taskset.*`` on verifiers' command line)."""

    env: str = ""
    """The AgentUnit env id (``AgentUnit/DB-v0`` or ``DB-v0``)."""
    split: str | None = None
    """Only tasks whose ``split`` is this; None for every task."""
    backend: str | None = None
    """The env's backend; None for the domain's embedded default."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Other keyword arguments of ``gym.make`` (``tasks`` as file paths, ``max_steps``, ``invalid_action`` ...):
    plain data, since verifiers dumps and re-validates its configs (and sends them to env servers)."""
    examples: bool = True
    """Put the domain's worked example in the prompt, as the built-in agent does."""
    protocol: ProtocolName | None = None
    """An evaluation protocol (``agentbench``, ``agentbench-fc``): the evaluator's stack under it
    (:func:`~agentunit_gym.wrappers.stack.make_eval_env`); None for the bare env."""
    agentbench_root: str | None = None
    """An AgentBench checkout whose prompts open each episode under ``agentbench``."""


class AgentUnitData(vf.TaskData):  # type: ignore[misc]
    """One AgentUnit task as verifiers task data."""

    info: dict[str, Any] = Field(default_factory=dict)
    """``env_id``, ``task_id``, ``split``: what the env needs to replay the task."""


class AgentUnitTask(vf.Task[AgentUnitData, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    """A task of :class:`AgentUnitTaskset`; scored by :class:`AgentUnitEnv` (the env's score)."""

    @property
    def key(self) -> str:
        """The env id and the task id: stable across runs (the default hashes ``idx`` too)."""
        return f"{self.data.info.get('env_id')}:{self.data.info.get('task_id')}"


def make_agentunit_env(config: AgentUnitTasksetConfig) -> gym.Env[str, str]:
    """The AgentUnit env a taskset config describes.

    Raises:
        ConfigError: no env id, or an unknown one.
    """
    register_envs()
    env_id = full_env_id(config.env)
    if env_id not in env_ids():
        raise ConfigError(f"the verifiers taskset needs an AgentUnit env id (taskset.env), got {config.env!r}; "
                          f"the ids are {', '.join(env_ids())}.")
    kwargs = dict(config.env_kwargs)
    if config.backend is not None:
        kwargs["backend"] = config.backend
    return make_protocol_env(env_id, config.protocol, agentbench_root=config.agentbench_root, **kwargs)


class AgentUnitTaskset(vf.Taskset[AgentUnitTask, AgentUnitTasksetConfig]):  # type: ignore[misc]
    """The tasks of one AgentUnit env id (one split, or all) that run on its backend.

    Each task's prompt is the opening conversation (system prompt apart), built from the
    env's reset on that task, so loading resets the env once per task.
    """

    def load(self) -> Iterator[AgentUnitTask]:
        env = make_agentunit_env(self.config)
        try:
            base = agent_env(env)
            env_id = full_env_id(self.config.env)
            for task in base.tasks:
                split = getattr(task, "split", None)
                if self.config.split is not None and split != self.config.split:
                    continue
                observation, info = env.reset(options={"task_id": task.id})
                chat = ChatTranscript(STYLE, examples=self.config.examples)
                opening = chat.start(info)
                chat.add_observation(str(observation))
                system, prompt = opening[0]["content"], copy.deepcopy(chat.messages[1:])
                data = AgentUnitData(id=task.id, name=task.id, prompt=prompt, system_prompt=system,
                                     info={"env_id": env_id, "task_id": task.id, "split": split})
                yield AgentUnitTask(data, self.config.task)
        finally:
            env.close()


class AgentUnitHarness(NullHarness):  # type: ignore[misc]
    """verifiers' tool-less chat loop, the harness of :data:`TASKSET_ID`: replies are text the env parses.

    verifiers runs its chat program as a uv script: it installs uv when it is missing and has uv
    fetch the script's packages (openai, mcp, httpx ...) from PyPI on the first rollout. Those
    packages are verifiers' own dependencies, so on the local subprocess runtime the program runs
    with the Python running this code instead (:class:`HostPythonPrograms`): no uv, no network
    at rollout time. Other runtimes (containers, sandboxes) keep verifiers' way.
    """

    async def setup(self, runtime: Any) -> None:
        if not isinstance(runtime, SubprocessRuntime):
            await super().setup(runtime)

    async def launch(self, ctx: Any, trace: Any, runtime: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(runtime, SubprocessRuntime):
            runtime = HostPythonPrograms(runtime)
        return await super().launch(ctx, trace, runtime, *args, **kwargs)


class HostPythonPrograms:
    """A local subprocess runtime whose PEP 723 programs run with this Python, not in a uv environment.

    Only :meth:`prepare_uv_script` differs: it writes the program into the runtime's workspace
    and returns ``[sys.executable, path]``; everything else is the runtime's own.
    """

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    async def prepare_uv_script(self, script: str | bytes, env: Mapping[str, str] | None = None, *,
                                activate: bool = True) -> list[str]:
        data = script.encode() if isinstance(script, str) else script
        path = f".agentunit-program-{hashlib.sha256(data).hexdigest()[:16]}.py"  # in the runtime's workspace
        await self._runtime.write(path, data)
        return [sys.executable, path]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class AgentUnitEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    """The env's one role, ``player`` (``--env.player.*``): runs locally by default; an episode
    deadline of :data:`EPISODE_DEADLINE_S` unless ``timeout`` says otherwise."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    timeout: TimeoutConfig = TimeoutConfig(episode=EPISODE_DEADLINE_S)


class AgentUnitEnv(vf.Env[AgentUnitEnvConfig]):  # type: ignore[misc]
    """One AgentUnit episode per verifiers episode; the reward is the env's score (module docstring)."""

    async def run(self, task: AgentUnitTask, agents: Any) -> None:
        # One thread per episode runs every call on its env: the env is made, stepped and
        # closed on the same thread, and the event loop stays free for other episodes.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentunit-episode") as thread:
            loop = asyncio.get_running_loop()

            def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
                return loop.run_in_executor(thread, lambda: fn(*args, **kwargs))

            env = await call(make_agentunit_env, self.taskset.config)
            try:
                await call(env.reset, options={"task_id": task.data.info["task_id"]})
                info: dict[str, Any] = {}
                steps = 0
                async with agents.player.interaction(task) as interaction:
                    segment = await interaction.turn()
                    while not segment.terminated:
                        try:
                            observation, _, terminated, truncated, info = await call(env.step, segment.last_reply)
                        except INFRA_ERRORS as exc:
                            # Raised inside the interaction: verifiers fails the trace (ok false) and
                            # the episode (episode.errors), so no reward is read from it.
                            record_failure(interaction.trace, FinishReason.ERROR, exc, steps)
                            raise
                        steps += 1
                        if terminated or truncated:
                            break
                        segment = await interaction.turn(str(observation))
                    if not info.get("score"):  # {} until the episode ends (info keys keep one type)
                        failure = agent_run_failure(interaction.trace)
                        if failure is not None and failure[0] is FinishReason.ERROR:
                            record_failure(interaction.trace, *failure, steps)
                            if interaction.trace.errors:
                                return  # verifiers recorded the failure on the trace already
                            raise failure[1]  # fails the trace: no reward is read from it
                        # The agent's run ended first: a context overflow, or its max_turns (the
                        # env's turn limit in effect).
                        reason, detail = (failure[0], str(failure[1])) if failure is not None else \
                            (FinishReason.TASK_LIMIT, "the agent's run ended before the episode did")
                        info = await call(agent_env(env).end_episode, reason, detail=detail)
                    record_score(interaction.trace, info, steps)
            finally:
                await call(env.close)


def agent_run_failure(trace: Any) -> tuple[FinishReason, AgentUnitError] | None:
    """Why an agent's run stopped before the env's episode ended, when the model is the cause.

    Returns:
        ``(ERROR, error)`` when the run failed (verifiers' typed error on the trace: a model
        endpoint's HTTP error or timeout, a harness that died) or a model call failed, or the
        run's time budget ran out while it waited for the model; ``(CONTEXT_LIMIT, error)`` when
        the model refused a conversation longer than its context (the agent's own end, as the
        evaluator counts it); None when the run simply stopped (its ``max_turns``).
    """
    if trace.errors:
        error = trace.errors[-1]
        status = f" (HTTP {error.status_code})" if error.status_code is not None else ""
        return FinishReason.ERROR, ModelAPIError(f"{error.type}{status}: {error.message or 'no message'}",
                                                 status=error.status_code)
    failed = trace.calls[-1].error if trace.calls else None
    if failed is not None:
        message, status = str(failed.message), failed.status_code
        body = message[message.index("{"):] if "{" in message else message  # "upstream 400: {...}": the body
        if status is not None and context_limit_message(status, body):
            return FinishReason.CONTEXT_LIMIT, ModelAPIError(f"the model refused the turn: {message}", status)
        return FinishReason.ERROR, ModelAPIError(f"the model call failed: {failed.type}: {message}", status)
    if trace.is_timeout:
        return FinishReason.ERROR, ModelAPIError(
            f"the agent's time budget ran out ({trace.stop_condition}) while it waited for the model")
    return None


def record_failure(trace: Any, reason: FinishReason, error: BaseException, steps: int) -> None:
    """Mark a verifiers trace as failed for ``error``: the reward ``None`` (not scored), the finish
    reason and the error in ``info["agentunit"]``."""
    trace.rewards[REWARD_NAME] = None
    trace.record_metric("steps", float(steps))
    trace.info["agentunit"] = {"finish_reason": reason.value, "score": None,
                               "error": f"{type(error).__name__}: {error}"}


def record_score(trace: Any, info: Mapping[str, Any], steps: int) -> None:
    """Put the env's score on a verifiers trace: the reward, the metrics and ``info["agentunit"]``."""
    score = dict(info["score"])
    trace.record_reward(REWARD_NAME, float(score["reward"]), 1.0)
    trace.record_metric("success", float(bool(score["success"])))
    trace.record_metric("steps", float(steps))
    for name, value in dict(score.get("components") or {}).items():
        if isinstance(value, (bool, int, float)):
            trace.record_metric(f"score/{name}", float(value))
    reason = info.get("finish_reason")
    trace.info["agentunit"] = {"finish_reason": getattr(reason, "value", reason) or None, "score": score}


def load_environment(env_id: str, split: str | None = None, *, backend: str | None = None,
                     examples: bool = True, player: Mapping[str, Any] | None = None,
                     protocol: ProtocolName | None = None, agentbench_root: str | None = None,
                     **env_kwargs: Any) -> AgentUnitEnv:
    """A verifiers environment over one AgentUnit env id.

    Args:
        env_id: ``AgentUnit/DB-v0`` or ``DB-v0``.
        split: only the tasks of this split (a task's ``split`` field); None for all tasks.
        backend: the env's backend; None for the embedded default.
        examples: put the domain's worked example in the prompt.
        player: verifiers ``AgentConfig`` fields of the one role (``max_turns``, ``runtime``,
            ``model``, ``client`` ...); default: a local subprocess runtime.
        protocol: ``agentbench`` or ``agentbench-fc`` plays each episode under that protocol (the
            evaluator's stack, :func:`~agentunit_gym.wrappers.stack.make_eval_env`); None the bare env.
        agentbench_root: an AgentBench checkout whose prompts open episodes under ``agentbench``.
        **env_kwargs: other keyword arguments of ``gym.make`` (``tasks`` as file paths, ``max_steps`` ...):
            plain data (verifiers dumps its configs).

    Returns:
        An :class:`AgentUnitEnv`; ``env.taskset`` iterates its tasks. Run it with verifiers
        (``env.serving()``, ``env.run_episode(task, ctx)``), its CLI or prime-rl.

    Raises:
        ConfigError: an unknown env id.
    """
    taskset = AgentUnitTasksetConfig(id=TASKSET_ID, env=full_env_id(env_id), split=split, backend=backend,
                                     examples=examples, env_kwargs=env_kwargs, protocol=protocol,
                                     agentbench_root=agentbench_root)
    if taskset.env not in env_ids():
        raise ConfigError(f"unknown AgentUnit env id {env_id!r}; the ids are {', '.join(env_ids())}.")
    fields: dict[str, Any] = {"taskset": taskset}
    if player is not None:
        fields["player"] = vf.AgentConfig(**{"runtime": vf.SubprocessConfig(), **dict(player)})
    return AgentUnitEnv(AgentUnitEnvConfig(**fields))


__all__ = ["REWARD_NAME", "STYLE", "TASKSET_ID", "AgentUnitData", "AgentUnitEnv", "AgentUnitEnvConfig",
           "AgentUnitHarness", "AgentUnitTask", "AgentUnitTaskset", "AgentUnitTasksetConfig", "HostPythonPrograms",
           "agent_run_failure", "load_environment", "make_agentunit_env", "record_failure", "record_score"]
