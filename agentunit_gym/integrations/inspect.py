"""AgentUnit suites as inspect_ai tasks: inspect's ReAct agent plays the env through its tools.

:func:`agentunit` (an inspect ``@task``) turns one env's suite into an inspect ``Task``:

- **dataset**: one sample per task the evaluator would run for the same settings
  (``agentunit-gym eval --env ENV --backend B -n N --seed S [--split ...] [--tasks ...]``):
  the same tasks (its seeded sample of ``n``) and the same per-episode seeds
  (:func:`~agentunit_gym.eval.plan.work.plan`). The suite is the bundled one (or one ``split`` of
  it), a task file or folder, or a generated set (``generated:ENV:SPLIT:COUNT[:SEED]``).
- **solver**: :func:`agentunit_agent`. Each sample gets its own env copy, made through the
  evaluator's env stack (:func:`~agentunit_gym.eval.plan.routing.default_env_factory`, so limits,
  loop detection and traps behave as under ``agentunit-gym eval``) in tool-calls-only mode
  (``action_format="tools"``) and under the evaluator's ``protocol`` (``-T protocol=agentbench-fc``:
  AgentBench FC's turn limit, endings and tool names), reset on the sample's task with its seed, and closed when
  the sample ends. The conversation opens as the built-in agent's ``tools`` conversation
  (:class:`~agentunit_gym.core.chat.ChatTranscript`); then inspect's ReAct agent
  (``inspect_ai.agent.react`` without its own submit tool) runs with the env's tools as
  inspect tools: each call is one env step with the JSON tool call as the action, and its
  result is the env's observation. A reply without a tool call is a step too (the env answers
  it, as AgentBench FC does). The loop ends with the episode: a committing tool (answer,
  finish, buy ...), the env's turn limit, or an inspect limit (``message_limit``,
  ``token_limit``, ``time_limit``: the episode then ends as TASK_LIMIT); a context overflow
  ends it as CONTEXT_LIMIT.
- **scorer**: :func:`agentunit_scorer`: the env's score. ``value`` is the reward (OS/DB
  success, KG F1, WebShop reward), the metrics are its ``mean`` and ``stderr`` and
  :func:`success_rate`; the score's metadata (and the sample's, under ``"agentunit"``) holds
  the finish reason, ``success``, ``steps`` and every score component.

A failure of the backend (:data:`~agentunit_gym.errors.INFRA_ERRORS`) is never a score: it
raises out of the sample, which inspect records as an error.

Run it with inspect's CLI (the package registers the task as ``agentunit_gym/agentunit``)::

    inspect eval agentunit_gym/agentunit -T env=DB-v0 -T backend=sqlite -T n=5 --model openai/gpt-4o

or from Python::

    from inspect_ai import eval
    from agentunit_gym.integrations.inspect import agentunit

    eval(agentunit(env="DB-v0", backend="sqlite", n=5), model="mockllm/model")

Raises on import:
    MissingDependencyError: ``inspect-ai`` is not installed (``pip install "agentunit-gym[inspect]"``).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

import gymnasium as gym

from agentunit_gym.core.chat import ChatTranscript
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.errors import INFRA_ERRORS, AgentUnitError, BackendError, ConfigError, MissingDependencyError
from agentunit_gym.integrations.suite import Suite, resolve_suite
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.protocols import PROTOCOLS, ProtocolName

INSPECT_EXTRA = "inspect"
"""The extra that installs inspect_ai."""

try:
    from inspect_ai import Task, task
    from inspect_ai.agent import AgentState, as_solver, react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.scorer import (
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        mean,
        metric,
        scorer,
        stderr,
    )
    from inspect_ai.solver import Generate, Solver, TaskState, solver
    from inspect_ai.tool import ToolCall, ToolDef, ToolParam, ToolParams
    from inspect_ai.util import LimitExceededError
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise MissingDependencyError(str(exc.name or "inspect_ai"), INSPECT_EXTRA,
                                 "agentunit_gym.integrations.inspect (AgentUnit suites in inspect_ai)") from exc

METADATA_KEY = "agentunit"
"""Where the episode's result goes in the sample's metadata."""

T = TypeVar("T")


# ------------------------------------------------------ the samples, the episode


def samples(suite: Suite) -> list[Sample]:
    """One inspect sample per episode of ``suite``: the input is the task's instruction, the
    metadata says which episode (``env_id``, ``task_id``, ``seed``)."""
    return [Sample(id=item.task_id, input=suite.instructions.get(item.task_id, item.task_id),
                   metadata={"env_id": item.env_id, "task_id": item.task_id, "seed": item.seed})
            for item in suite.items]


class Episode:
    """One sample's env copy, driven from inspect's event loop.

    Every call on the env runs on one thread of the episode's own (a backend connection may
    belong to the thread that opened it), so the loop stays free for the other samples.
    """

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.env: gym.Env[str, str] | None = None
        self.steps = 0
        self.info: dict[str, Any] = {}
        """The last step's info (the reset's before the first step)."""
        self.ended = False
        self.failure: AgentUnitError | None = None
        """The backend failure that ended the episode, if one did."""
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentunit-inspect")

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, functools.partial(fn, *args, **kwargs))

    async def start(self, task_id: str, seed: int) -> tuple[str, dict[str, Any]]:
        """Make the env and reset it on ``task_id``; the prompt and the reset info."""
        self.env = await self._call(self.suite.make_env)
        observation, info = await self._call(self.env.reset, seed=seed, options={"task_id": task_id})
        self.info = dict(info)
        return str(observation), self.info

    async def step(self, action: str) -> str:
        """One env step; the observation. A step after the end is answered, not sent."""
        if self.env is None or self.ended:
            return "The episode has ended: no further action is taken."
        try:
            observation, _, terminated, truncated, info = await self._call(self.env.step, action)
        except INFRA_ERRORS as exc:
            # Kept for the solver to raise after the agent: inspect turns a TimeoutError raised by a
            # tool into a message to the model, and a backend failure must fail the sample instead.
            self.failure = exc
            self.ended = True
            self.info.update(finish_reason=FinishReason.ERROR, finish_detail=f"{type(exc).__name__}: {exc}")
            raise
        self.steps += 1
        self.info = dict(info)
        self.ended = bool(terminated or truncated)
        return str(observation)

    async def end(self, reason: FinishReason, detail: str) -> None:
        """End a running episode for ``reason`` (the agent stopped before the env did)."""
        if self.env is None or self.ended:
            return
        self.ended = True
        base = agent_env(self.env)
        if base.finish_reason is None:
            self.info.update(await self._call(base.end_episode, reason, detail=detail))
        else:  # the env ended it itself: a backend failure (ERROR)
            self.info.update(finish_reason=base.finish_reason, finish_detail=detail)

    async def close(self) -> None:
        """Release the env (idempotent) and the episode's thread."""
        env, self.env = self.env, None
        try:
            if env is not None:
                await self._call(env.close)
        except BaseException:
            if env is not None:  # cancelled while closing: the episode's thread still closes it
                self._thread.submit(env.close)
            raise
        finally:
            self._thread.shutdown(wait=False)

    def result(self) -> dict[str, Any]:
        """The episode's result: ``finish_reason``, ``reward``, ``success``, ``steps``,
        ``components`` and ``detail`` (None for the score's fields until it ends)."""
        reason = self.info.get("finish_reason")
        score = dict(self.info.get("score") or {})
        return {"finish_reason": getattr(reason, "value", reason) or None,
                "finish_detail": self.info.get("finish_detail") or None,
                "reward": float(score["reward"]) if "reward" in score else None,
                "success": bool(score["success"]) if "success" in score else None,
                "steps": self.steps,
                "components": dict(score.get("components") or {}),
                "detail": score.get("detail")}

    def tools(self, schemas: Sequence[Mapping[str, Any]]) -> list[ToolDef]:
        """The env's tools (their OpenAI schemas, ``info["tools"]``) as inspect tools that step this episode."""
        return [self._tool(schema["function"]) for schema in schemas]

    def _tool(self, function: Mapping[str, Any]) -> ToolDef:
        name = str(function["name"])

        async def execute(**kwargs: Any) -> str:
            return await self.step(json.dumps({"name": name, "arguments": kwargs}, ensure_ascii=False))

        parameters = function.get("parameters") or {}
        params = ToolParams(properties={key: ToolParam.model_validate(value)
                                        for key, value in (parameters.get("properties") or {}).items()},
                            required=list(parameters.get("required") or []))
        # One action a turn: the calls of one message are env steps in order, never at once.
        return ToolDef(execute, name=name, description=str(function.get("description") or name),
                       parameters=params, parallel=False)

    async def on_continue(self, state: AgentState) -> bool | str:
        """ReAct's continue hook: stop when the episode has ended; a reply without a tool call
        is sent to the env (one turn, answered with the env's feedback, which goes back to the model)."""
        if self.ended:
            return False
        if state.output.message.tool_calls:
            return True
        feedback = await self.step(state.output.completion)
        return False if self.ended else feedback


def opening_messages(info: Mapping[str, Any], observation: str, examples: bool = True) -> list[ChatMessage]:
    """The conversation the built-in agent opens in ``tools`` mode, as inspect messages: the
    system message, the domain's worked example (``examples``) and the task."""
    chat = ChatTranscript("tools", examples=examples)
    chat.start(info)
    chat.add_observation(observation)
    messages: list[ChatMessage] = []
    functions: dict[str, str] = {}  # tool call id -> tool name, for the results (some providers need it)
    for message in chat.messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            messages.append(ChatMessageSystem(content=content))
        elif role == "user":
            messages.append(ChatMessageUser(content=content))
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            messages.append(ChatMessageTool(content=content, tool_call_id=call_id, function=functions.get(call_id)))
        else:
            calls = [ToolCall(id=str(c["id"]), function=str(c["function"]["name"]),
                              arguments=json.loads(c["function"]["arguments"] or "{}"))
                     for c in message.get("tool_calls") or []]
            functions.update((call.id, call.function) for call in calls)
            messages.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
    return messages


# ------------------------------------------------------------ inspect parts


@solver  # type: ignore[untyped-decorator, unused-ignore]  # untyped without inspect_ai
def agentunit_agent(suite: Suite, examples: bool = True) -> Solver:
    """inspect's ReAct agent on one env copy per sample (module docstring).

    Args:
        suite: what :func:`resolve_suite` made.
        examples: put the domain's worked example in the conversation, as the built-in agent does.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        episode = Episode(suite)
        try:
            observation, info = await episode.start(str(state.metadata["task_id"]), int(state.metadata["seed"]))
            state.messages = opening_messages(info, observation, examples)
            agent = react(prompt=None, tools=episode.tools(info["tools"]), submit=False,
                          on_continue=episode.on_continue)
            try:
                state = await as_solver(agent)(state, generate)
            except LimitExceededError as exc:
                # inspect scores the sample after a limit: the episode ends as a turn limit does.
                await episode.end(FinishReason.TASK_LIMIT, f"inspect's {exc.type} limit: {exc.message}")
                raise
            except Exception as exc:
                # A failed model call or backend: inspect records the sample as an error, never a score.
                await episode.end(FinishReason.ERROR, f"{type(exc).__name__}: {exc}")
                raise
            if episode.failure is not None:
                # Not re-raised as is: inspect takes a TimeoutError out of a solver for its time limit
                # and scores the sample; a BackendError fails it.
                failure = episode.failure
                raise BackendError(f"the env's backend failed during the episode: {type(failure).__name__}: "
                                   f"{failure}") from failure
            if not episode.ended:
                overflow = state.output.stop_reason == "model_length"
                await episode.end(FinishReason.CONTEXT_LIMIT if overflow else FinishReason.TASK_LIMIT,
                                  "the conversation outgrew the model's context" if overflow
                                  else "the agent stopped before the episode ended")
        finally:
            state.metadata[METADATA_KEY] = episode.result()
            await episode.close()
        return state

    return solve


@metric  # type: ignore[untyped-decorator, unused-ignore]  # untyped without inspect_ai
def success_rate() -> Metric:
    """The share of samples whose episode succeeded (the score metadata's ``success``)."""

    def compute(scores: list[SampleScore]) -> float:
        found = [bool((s.score.metadata or {}).get("success")) for s in scores]
        return sum(found) / len(found) if found else 0.0

    return compute


@scorer(metrics=[mean(), stderr(), success_rate()])  # type: ignore[untyped-decorator, unused-ignore]  # untyped without inspect_ai
def agentunit_scorer() -> Scorer:
    """The env's score of the sample's episode: ``value`` the reward; ``metadata`` the finish
    reason, ``success``, ``steps`` and the score's components (what :func:`agentunit_agent` recorded)."""

    async def score(state: TaskState, target: Target) -> Score:
        result = state.metadata.get(METADATA_KEY)
        if not isinstance(result, Mapping) or result.get("reward") is None:
            raise ConfigError("agentunit_scorer scores episodes played by agentunit_agent: this sample has no "
                              "episode result (state.metadata['agentunit']); use the agentunit task's solver.")
        return Score(value=float(result["reward"]), answer=str(result["finish_reason"]),
                     explanation=str(result.get("finish_detail") or result.get("detail") or ""),
                     metadata=dict(result))

    return score


@task  # type: ignore[untyped-decorator, unused-ignore]  # untyped without inspect_ai
def agentunit(env: str, split: str | None = None, tasks: str | None = None, n: int | None = None,
              seed: int = 0, backend: str | None = None, task_ids: str | list[str] | None = None,
              examples: bool = True, protocol: str = "agentunit") -> Task:
    """One AgentUnit env's suite as an inspect task (module docstring).

    Args:
        env: the env id (``DB-v0``, ``OS-v0``, ``KG-v0``, ``WebShop-v0``, or the full id).
        split: only the tasks of this split (``train``, ``test``).
        tasks: a task file or folder, or ``generated:ENV:SPLIT:COUNT[:SEED]``; None for the bundled suite.
        n: tasks sampled with ``seed`` (as ``agentunit-gym eval -n``); None for all.
        seed: the run's seed (the sample of ``n``, each episode's seed).
        backend: the env's backend (``sqlite``, ``local``, ``embedded`` ...); None for the default.
        task_ids: only these tasks (a comma-separated string on inspect's command line).
        examples: put the domain's worked example in the conversation.
        protocol: ``agentunit`` (default), ``agentbench`` or ``agentbench-fc``: the episodes play under
            that protocol, as under ``agentunit-gym eval --protocol`` (``-T protocol=agentbench-fc``).

    Returns:
        An inspect ``Task`` with :func:`agentunit_agent` and :func:`agentunit_scorer`.

    Raises:
        ConfigError, TaskFileError: as :func:`resolve_suite`.
    """
    ids = [t for t in task_ids.split(",") if t] if isinstance(task_ids, str) else list(task_ids or [])
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}.")
    suite = resolve_suite(env, split=split, tasks=tasks, n=n, seed=seed, backend=backend, task_ids=ids,
                          protocol=cast(ProtocolName, protocol))
    return Task(dataset=samples(suite), solver=agentunit_agent(suite, examples=examples), scorer=agentunit_scorer(),
                name=f"agentunit-{suite.env_id.split('/')[-1]}",
                metadata={"env_id": suite.env_id, "backend": suite.options.get("backend"), "split": split,
                          "tasks": tasks, "n": n, "seed": seed, "protocol": protocol})


__all__ = ["INSPECT_EXTRA", "METADATA_KEY", "Episode", "Suite", "agentunit", "agentunit_agent", "agentunit_scorer",
           "opening_messages", "resolve_suite", "samples", "success_rate"]
