"""The base of every AgentUnit env: reset/step/close bookkeeping, the finish protocol, info keys.

A domain env (OS, DB, ...) subclasses :class:`AgentEnv` and implements a few hooks:
``_start_episode`` (set the task up in the backend, return the prompt), ``_parse_react``
(its AgentBench grammar), ``_execute`` (run a non-committing action), ``_score`` (grade
the episode), ``_end_episode`` and ``_close_backend`` (release resources), and
``_render_react`` (write a call in its grammar, for the oracle). Everything else, the
step counting, JSON tool calls, classification of invalid replies, the step limit and the
``info`` keys, lives here so every domain behaves the same.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast

import gymnasium as gym

from agentunit_gym.core.actions import (
    Action,
    ActionError,
    ActionIssue,
    ToolSpec,
    looks_like_json_call,
    parse_json_call,
    render_json_call,
)
from agentunit_gym.core.domain import Domain
from agentunit_gym.core.finish import FinishReason, LimitKind
from agentunit_gym.core.info import (
    RESET_OPTION_KEYS,
    EndInfo,
    ResetInfo,
    StepInfo,
    StepTiming,
    merge_end,
    running_step_info,
    score_info,
    stable_details,
)
from agentunit_gym.core.reference import SENTINEL, OutputReply
from agentunit_gym.core.score import Score
from agentunit_gym.core.spaces import UnicodeText
from agentunit_gym.core.task_pin import TaskPin
from agentunit_gym.core.trace import AgentReply
from agentunit_gym.errors import (
    AgentUnitError,
    ConfigError,
    EpisodeStateError,
    InterruptedEpisodeError,
    ResetOptionError,
    TaskFileError,
    TaskNotFoundError,
)
from agentunit_gym.tasks.loader import load_tasks
from agentunit_gym.tasks.spec import ReferenceStep, Refusal, TaskSpec
from agentunit_gym.tasks.splits import filter_split

TaskT = TypeVar("TaskT", bound=TaskSpec)

NO_TOOL_CALL_MESSAGE = "No executable tool calls found."
NO_TOOL_CALL_HINT = "Please call a tool instead."
"""What a reply without a tool call reads in tool-calls-only mode (:meth:`AgentEnv.require_tool_calls`):
AgentBench FC's answer to one ("No executable tool calls found. Please call a tool instead")."""

logger = logging.getLogger("agentunit_gym")

InvalidPolicy = Literal["continue", "terminate"]

ActionFormat = Literal["text", "tools"]
"""How the agent writes actions: ``text`` (the domain's ReAct grammar, or a JSON call) or
``tools`` (tool calls only, :meth:`AgentEnv.require_tool_calls`)."""

ACTION_FORMATS: tuple[str, ...] = ("text", "tools")

TaskSource = str | Path | Sequence[str | Path] | Sequence[TaskSpec] | None


@dataclass
class Execution:
    """What running one non-committing action produced."""

    observation: str
    """What the agent reads next."""
    details: dict[str, Any] = field(default_factory=dict)
    """Exit code, timeout, truncation, row count ... (goes to ``info["execution"]``)."""
    error: bool = False
    """Whether the action failed (non-zero exit, SQL error): an agent mistake, not ours."""


def is_tool_call(reply: str) -> bool:
    """Whether a reply is a tool call: the model's message carries ``tool_calls`` (an
    :class:`~agentunit_gym.core.trace.AgentReply` with its ``message``), or, for a reply
    without a message, the text is a JSON call."""
    message = reply.message if isinstance(reply, AgentReply) else None
    if message is not None:
        return bool(message.get("tool_calls"))
    return looks_like_json_call(reply)


def without_grammar(prompt: str, grammar: str) -> str:
    """``prompt`` with the reply grammar taken out (the blank lines around it closed up); a
    prompt that never states the grammar (a third-party env may leave it to the system
    message) is returned as is.

    Raises:
        ConfigError: the prompt states part of the grammar (one of its lines) but not all of
            it verbatim, so it cannot be taken out.
    """
    if not grammar:
        return prompt
    if grammar not in prompt:
        if any(len(line.strip()) >= 12 and line.strip() in prompt for line in grammar.splitlines()):
            raise ConfigError("tool-calls-only mode: the env's first observation states part of its grammar but "
                              "not all of it verbatim, so it cannot be left out; the domain env must state "
                              "info['grammar'] as is.")
        return prompt
    head, _, tail = prompt.partition(grammar)
    head, tail = head.rstrip(), tail.lstrip()
    return f"{head}\n\n{tail}" if head and tail else head + tail


class AgentEnv(gym.Env[str, str], Generic[TaskT]):
    """Base class of the AgentUnit envs.

    Args:
        tasks: the suite: None for the bundled one, task files or folders (native, or a format
            the domain's description detects, e.g. an AgentBench checkout), or task specs.
        max_steps: turn limit; None takes the task's, else the domain's AgentBench default.
        invalid_action: ``"continue"`` shows the feedback and goes on (AgentUnit's loop);
            ``"terminate"`` ends the episode with IF/IA (AgentBench's behaviour).
        render_mode: None or ``"ansi"``.
        split: ``"train"`` or ``"test"`` (``"dev"`` for AgentBench's data): the suite
            restricted to the tasks of that split (docs/tasks.md, "Splits"); None for all.
        action_format: ``"text"`` (default): a reply is the domain's text grammar or a JSON
            tool call. ``"tools"``: tool calls only, as under ``eval --protocol agentbench-fc``
            (:meth:`require_tool_calls`): no text grammar in what the agent is sent, and a
            reply without a tool call is answered, never run.

    Raises:
        ConfigError: an unknown option value, or a split no task of the suite is in.
        TaskFileError: a task file that does not validate.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    DOMAIN: ClassVar[Domain]
    """The domain's description (its package's ``DOMAIN``): the one place the env reads its
    name, task model, step limit, bundled suite and task formats from."""
    tools: ClassVar[tuple[ToolSpec, ...]]
    grammar: ClassVar[str]
    """How to write actions, shown in ``info`` and in prompts."""

    def __init__(
        self,
        *,
        tasks: TaskSource = None,
        max_steps: int | None = None,
        invalid_action: InvalidPolicy = "continue",
        render_mode: str | None = None,
        split: str | None = None,
        action_format: ActionFormat = "text",
    ) -> None:
        if invalid_action not in ("continue", "terminate"):
            raise ConfigError(f"invalid_action must be 'continue' or 'terminate', got {invalid_action!r}.")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        if max_steps is not None and max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {max_steps}.")
        if action_format not in ACTION_FORMATS:
            raise ConfigError(f"action_format must be 'text' or 'tools', got {action_format!r}: 'tools' for tool "
                              "calls only (no text grammar), 'text' for the domain's text grammar or JSON calls.")
        self.render_mode = render_mode
        self.invalid_action = invalid_action
        self._max_steps_override = max_steps
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self._tool_table = {t.name: t for t in self.tools}
        self.split = split
        self._all_tasks: list[TaskT] = filter_split(self._resolve_tasks(tasks), split,
                                                    where=f"this {self.domain} env's suite")
        self._task: TaskT | None = None
        self._steps = 0
        self._finish: FinishReason | None = None
        self._score_value: Score | None = None
        self._closed = False
        self._last_observation = ""
        self._interrupted = ""
        self._step_cap: int | None = None
        self._tool_calls_only = action_format == "tools"
        self._pin: TaskPin[TaskT] = TaskPin()

    # ----------------------------------------------------------------- hooks

    @property
    @abstractmethod
    def backend_name(self) -> str:
        """Which backend implementation this env runs on (``docker``, ``local``, ``sqlite`` ...)."""

    @property
    def backend_limits_off(self) -> str:
        """The backend's resource limits that do not apply on this host, and why; ``""`` when
        all apply or the backend has none (``info["backend_limits_off"]``)."""
        return ""

    @abstractmethod
    def _start_episode(self, task: TaskT) -> str:
        """Set the task up in the backend and return the first observation (the prompt)."""

    @abstractmethod
    def _parse_react(self, text: str) -> Action | ActionError:
        """Parse a reply written in the domain's AgentBench grammar."""

    @abstractmethod
    def _execute(self, action: Action) -> Execution:
        """Run a non-committing action."""

    @abstractmethod
    def _score(self, action: Action | None) -> Score:
        """Grade the episode. ``action`` is the committing action, None if the agent never committed."""

    @abstractmethod
    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        """Write a call in the domain's ReAct grammar."""

    def admin_run(self, command: str) -> Execution:
        """Run a domain command outside the agent's view, with full rights: a shell command in
        the OS sandbox, SQL on the episode database. Used to plant traps and check state
        after an episode; never counts as a step.

        Raises:
            EpisodeStateError: no episode has been started.
        """
        raise NotImplementedError(f"{type(self).__name__} has no admin_run")

    def _refusal(self, task: TaskT) -> Refusal | None:
        """Why this env cannot run ``task`` for a reason of its domain (the OS env: a task that
        switches users, on a sandbox that maps one uid); None here, where every task its
        backend supports runs (the network aside)."""
        return None

    def _validate(self, action: Action) -> Action | ActionError:
        """Domain checks on a parsed action (e.g. a tool not allowed in this task)."""
        return action

    def _end_episode(self) -> None:
        """Release per-episode resources (an episode database, ...). Must be idempotent."""

    def _close_backend(self) -> None:
        """Release every backend resource. Called once."""

    def _warm_backend(self) -> None:
        """Start the backend now rather than at the first reset (a container, a sandbox, a
        server connection). Must be idempotent and leave the env as if never used."""

    def warm_up(self) -> None:
        """Start the backend ahead of the first ``reset()``. Optional: ``reset()`` starts it
        anyway. The evaluator calls it on every env copy side by side while it makes them, so
        the first episodes do not all pay a container's or a sandbox's start at once.

        Raises:
            BackendError: the backend could not be started (``reset()`` would raise the same).
        """
        if self._closed:
            raise EpisodeStateError("this env is closed")
        self._warm_backend()

    # ------------------------------------------------------------ properties

    @property
    def domain(self) -> str:
        """The short domain name (``info["domain"]``), from :attr:`DOMAIN`."""
        return self.DOMAIN.name

    @property
    def task_model(self) -> type[TaskSpec]:
        """The pydantic model of the domain's tasks, from :attr:`DOMAIN`."""
        return self.DOMAIN.task_model

    @property
    def default_max_steps(self) -> int:
        """The domain's turn limit (AgentBench's), from :attr:`DOMAIN`."""
        return self.DOMAIN.step_limit

    @property
    def network(self) -> bool:
        """Whether the env's backend reaches the network (made with ``network=True``). False
        here: an env whose domain has no network option never does; tasks that need the
        network are then left out of :attr:`tasks`."""
        return False

    @property
    def tasks(self) -> list[TaskT]:
        """The tasks this env can run (:meth:`not_runnable` has no reason against them)."""
        return [t for t in self._all_tasks if self.not_runnable(t) is None]

    def not_runnable(self, task: TaskT) -> str | None:
        """Why this env cannot run ``task``, None when it can: a backend the task does not run
        on, then the domain's own reason (:meth:`_refusal`), then the network it lacks.

        Example: ``"not run on local: runs only on docker"``.
        """
        backend = self.backend_name
        if task.supports(backend):
            refusal = self._refusal(task)
            if refusal is not None:
                return refusal.reason
        return task.not_runnable(backend, network=self.network)

    def refusals(self) -> list[tuple[TaskT, Refusal]]:
        """The suite's tasks that run on this backend but that the env refuses for a reason of
        its domain (for the run's one-line note, :func:`~agentunit_gym.tasks.spec.left_out_note`)."""
        backend = self.backend_name
        found = [(t, self._refusal(t)) for t in self._all_tasks if t.supports(backend)]
        return [(t, r) for t, r in found if r is not None]

    @property
    def suite(self) -> list[TaskT]:
        """Every task of the env's suite, whether its backend can run it or not."""
        return list(self._all_tasks)

    @property
    def task(self) -> TaskT | None:
        """The current episode's task."""
        return self._task

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the current episode ended, None while it runs."""
        return self._finish

    @property
    def max_steps(self) -> int:
        """The turn limit: ``max_steps=`` given to the env, else the task's, else the domain's;
        a cap from ``gym.make(..., max_episode_steps=N)`` (see :meth:`cap_steps`) replaces the
        task's and the domain's and lowers ``max_steps=``."""
        if self._step_cap is not None:
            if self._max_steps_override is not None:
                return min(self._max_steps_override, self._step_cap)
            return self._step_cap
        if self._max_steps_override is not None:
            return self._max_steps_override
        if self._task is not None and self._task.max_steps is not None:
            return self._task.max_steps
        return self.default_max_steps

    @property
    def tool_table(self) -> dict[str, ToolSpec]:
        return dict(self._tool_table)

    def cap_steps(self, max_episode_steps: int) -> None:
        """Make ``max_episode_steps`` the env's turn limit, so the prompt (where a domain states
        the limit), ``info["max_steps"]`` and the episode's end agree with the ``TimeLimit``
        that ``gym.make(..., max_episode_steps=N)`` puts over the env. Called by
        :class:`~agentunit_gym.wrappers.limits.EndTruncatedEpisode`; the prompt says it from the next reset.

        Raises:
            ConfigError: a cap below 1.
        """
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ConfigError(f"max_episode_steps must be an integer of at least 1, got {max_episode_steps!r}.")
        self._step_cap = max_episode_steps

    # ------------------------------------------------------------- pickling

    _live_state: ClassVar[tuple[str, ...]] = ()
    """Attributes that hold live resources (a sandbox, a connection, a store, a session). A
    pickle or a copy carries them as None and the domain env reopens its backend lazily on
    first use, in the process that unpickled it."""

    def _travel_refusal(self) -> str:
        """Why this env cannot be pickled, ``""`` when it can (an env made around a backend
        object the caller passed in cannot reopen it elsewhere)."""
        return ""

    def __getstate__(self) -> dict[str, Any]:
        """The env without its live resources and without a running episode (see
        docs/training.md, "Pickling and processes").

        Raises:
            ConfigError: the env was made around a backend object it cannot reopen.
        """
        why = self._travel_refusal()
        if why:
            raise ConfigError(f"this {self.domain} env cannot be pickled or copied: {why}")
        state = dict(self.__dict__)
        for name in self._live_state:
            state[name] = None
        running = self._task is not None and self._finish is None and not self._closed
        state["_interrupted"] = self._task.id if running and self._task is not None else ""
        state["_task"] = None
        state["_finish"] = None
        state["_score_value"] = None
        state["_steps"] = 0
        state["_pin"] = self._pin.travelling()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ------------------------------------------------------------- the API

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]; ResetInfo is one
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, ResetInfo]:
        """Start an episode.

        Args:
            seed: seeds the env's RNG, which picks the task when none is named.
            options: ``{"task_id": ...}`` or ``{"task": TaskSpec | dict}`` picks the task;
                ``"sticky": True`` pins it: a reset with neither seed nor options (an
                autoreset) plays it again, until a reset with a seed or options
                (:mod:`~agentunit_gym.core.task_pin`). No other key is accepted
                (:data:`~agentunit_gym.core.info.RESET_OPTION_KEYS`).

        Returns:
            The prompt, and ``info`` (a :class:`~agentunit_gym.core.info.ResetInfo`) with the
            task id, its split, instruction, tools, grammar, step limit and the backend.

        Raises:
            ResetOptionError: an option key other than ``task_id``, ``task`` and ``sticky``.
            LostResetOptionsError: a reset without options right after a reset with options
                that followed an ended episode, before any step (gymnasium 1.4's lost autoreset).
            TaskNotFoundError: an unknown task id.
            ConfigError: a task this backend does not support, or an empty suite.
        """
        super().reset(seed=seed)
        if self._closed:
            raise EpisodeStateError("reset() after close(): make a new env.")
        unknown = sorted(str(k) for k in (options or {}) if k not in RESET_OPTION_KEYS)
        if unknown:
            raise ResetOptionError.unknown_keys(unknown, RESET_OPTION_KEYS)
        request = self._pin.request(seed, options, episode_ended=self._task is not None and self._finish is not None)
        self._release_episode()
        task = self._pick_task(request.options)
        self._pin.started(task, request)
        self._task = task
        self._steps = 0
        self._finish = None
        self._score_value = None
        self._interrupted = ""
        started = time.perf_counter()
        prompt = self._start_episode(task)
        if self._tool_calls_only:
            prompt = without_grammar(prompt, self.grammar)
        self._last_observation = prompt
        info: ResetInfo = {
            "task_id": task.id,
            "instruction": task.instruction,
            "category": task.category,
            "domain": self.domain,
            "backend": self.backend_name,
            "split": task.split or "",
            "max_steps": self.max_steps,
            "optimal_steps": task.k_opt,
            "tools": [t.json_schema() for t in self.tools],
            "grammar": "" if self._tool_calls_only else self.grammar,
            "step": 0,
            "finish_reason": "",
            "timing": StepTiming(time.perf_counter() - started),
            "backend_limits_off": self.backend_limits_off,
        }
        return prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:  # type: ignore[override]
        """Parse the agent's reply, act on it, observe.

        Returns:
            ``(observation, reward, terminated, truncated, info)``; ``info`` is a
            :class:`~agentunit_gym.core.info.StepInfo`: every key on every step, with
            ``finish_reason`` ``""`` while running, ``action`` or ``action_error`` (the other
            ``{}``), ``execution`` details, ``timing``, and ``score`` (``{}`` until the end).

        Raises:
            EpisodeStateError: step before reset or after the episode ended.
            InterruptedEpisodeError: step on a pickled or copied env before its ``reset()``.
            BackendError, BackendTimeoutError, BackendUnavailableError: infrastructure failed;
                the episode is over (finish reason ERROR) and the next reset recovers.
        """
        if self._closed:
            raise EpisodeStateError("step() after close(): make a new env.")
        if self._task is None and self._interrupted:
            raise InterruptedEpisodeError(
                f"step() on a copy of the env made while episode {self._interrupted!r} was running: the "
                "episode's backend state (shell, database, session) does not travel in a pickle or a copy. "
                "Call reset() on the copy first (reset(options={'task_id': ...}) to run that task again)."
            )
        if self._task is None:
            raise EpisodeStateError("step() before reset(): call reset() first.")
        if self._finish is not None:
            raise EpisodeStateError(
                f"step() after the episode ended ({self._finish.value}): call reset() first."
            )
        started = time.perf_counter()
        self._steps += 1
        self._pin.stepped()
        info = running_step_info(self._steps, self._task.id, self.max_steps,
                                 backend_limits_off=self.backend_limits_off)
        reward = 0.0
        terminated = truncated = False
        try:
            parsed = self.parse_action(action)
            if isinstance(parsed, ActionError):
                observation = parsed.feedback()
                info["action_error"] = parsed.to_info()
                # Tool-calls-only mode answers a reply without a call and goes on, as AgentBench FC's loop does.
                answered = self._tool_calls_only and parsed.issue is ActionIssue.NO_CALL
                if self.invalid_action == "terminate" and not answered:
                    merge_end(info, self.end_episode(parsed.reason, detail=parsed.message))
                    terminated = True
            else:
                info["action"] = parsed.to_info()
                info["thought"] = parsed.thought or ""
                if self._tool_table[parsed.tool].commits:
                    merge_end(info, self._commit(parsed))
                    observation = "Episode finished."
                    terminated = True
                else:
                    execution = self._execute(parsed)
                    observation = execution.observation
                    info["execution"] = stable_details(dict(execution.details))
                    info["execution_error"] = bool(execution.error)
            if not terminated and self._steps >= self.max_steps:
                limit_end = self.end_episode(FinishReason.TASK_LIMIT, detail=f"step limit {self.max_steps} reached")
                merge_end(info, limit_end)
                info["limit"] = LimitKind.STEPS
                truncated = True
        except AgentUnitError:
            self._finish = FinishReason.ERROR
            raise
        if self._score_value is not None:
            reward = self._score_value.reward
        info["timing"] = StepTiming(time.perf_counter() - started)
        self._last_observation = observation
        return observation, reward, terminated, truncated, info

    def require_tool_calls(self, required: bool = True) -> None:
        """Function-calling mode (``eval --protocol agentbench-fc``): only tool calls are actions.

        The first observation leaves out the text grammar (``info["grammar"]`` is ``""``), and
        a reply that is not a tool call is never parsed as text: it is an invalid reply
        (issue ``no_call``) answered with AgentBench FC's words
        (:data:`NO_TOOL_CALL_MESSAGE`, :data:`NO_TOOL_CALL_HINT`); it counts as a turn. A
        reply is a tool call when the model's message carries one (an
        :class:`~agentunit_gym.core.trace.AgentReply` with its ``message``: text that merely
        looks like JSON in the message's content is not a call), or, from an agent that gives
        no message, when it is a JSON call (``{"name": ..., "arguments": {...}}``). Such a reply
        never ends the episode, even with ``invalid_action="terminate"``. The oracle's replies
        (:meth:`render_action`) are JSON calls.

        ``gym.make(env_id, action_format="tools")`` makes an env in this mode; this method
        switches a made one. Replies are read so from the next ``step`` on; the first
        observation changes at the next ``reset``.
        """
        self._tool_calls_only = required

    @property
    def tool_calls_only(self) -> bool:
        """Whether only tool calls are actions (:meth:`require_tool_calls`)."""
        return self._tool_calls_only

    @property
    def action_format(self) -> ActionFormat:
        """``"tools"`` in tool-calls-only mode (:meth:`require_tool_calls`), else ``"text"``."""
        return "tools" if self._tool_calls_only else "text"

    def parse_action(self, text: str) -> Action | ActionError:
        """Turn a raw reply into an action, or say why it is not one (no side effects)."""
        if not isinstance(text, str):
            return ActionError(ActionIssue.MALFORMED, f"the reply must be text, got {type(text).__name__}.")
        if self._tool_calls_only and not is_tool_call(text):
            return ActionError(ActionIssue.NO_CALL, NO_TOOL_CALL_MESSAGE, hint=NO_TOOL_CALL_HINT)
        if looks_like_json_call(text):
            parsed = parse_json_call(text, self._tool_table)
        else:
            parsed = self._parse_react(text)
        if isinstance(parsed, ActionError):
            return parsed
        return self._validate(parsed)

    def end_episode(self, reason: FinishReason, *, detail: str = "") -> EndInfo:
        """End the running episode for ``reason`` (used by limit and policy wrappers).

        Returns:
            The ``info`` entries of the end (:class:`~agentunit_gym.core.info.EndInfo`):
            ``finish_reason``, ``score`` (a :class:`~agentunit_gym.core.info.ScoreInfo`),
            ``finish_detail`` and ``limit`` (``""``: the caller names the limit).

        Raises:
            EpisodeStateError: no episode is running.
        """
        if self._task is None or self._finish is not None:
            raise EpisodeStateError("end_episode() needs a running episode.")
        if reason is FinishReason.COMPLETE:
            raise ConfigError("COMPLETE is reached through a committing action, not end_episode().")
        score = self._score(None)
        if score.success:
            # Success needs a commit; state that happens to be right is recorded, not rewarded.
            score = Score(reward=0.0, success=False, components={**score.components, "state_correct": True},
                          detail=f"ended with {reason.abbreviation} before committing")
        return self._record_end(reason, score, detail)

    def render_action(self, step: ReferenceStep, form: Literal["react", "json"] | None = None) -> str:
        """Write a reference step as the agent would send it (used by the oracle).

        ``form`` None writes it in the env's action format: a JSON call in tool-calls-only mode
        (:attr:`action_format` ``tools``), else the ReAct grammar. A ``from_output`` step
        becomes an :class:`~agentunit_gym.core.reference.OutputReply`, which the oracle
        completes from the previous observation.

        Raises:
            ConfigError: the step does not fit the tool, or asks for an output this env cannot read.
        """
        if form is None:
            form = "json" if self._tool_calls_only else "react"
        if step.from_output:
            return self._render_from_output(step, form)
        arguments = self._arguments_of(step)
        if form == "json":
            return render_json_call(step.tool, arguments)
        return self._render_react(step.tool, arguments)

    def render(self) -> str | None:
        """The last observation in ``ansi`` mode, else None."""
        if self.render_mode == "ansi":
            return self._last_observation
        return None

    def close(self) -> None:
        """Release every container, connection and temp dir. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._release_episode()
        finally:
            self._close_backend()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    # -------------------------------------------------------------- private

    def _commit(self, action: Action) -> EndInfo:
        score = self._score(action)
        return self._record_end(FinishReason.COMPLETE, score, score.detail)

    def _record_end(self, reason: FinishReason, score: Score, detail: str) -> EndInfo:
        self._finish = reason
        self._score_value = score
        try:
            self._end_episode()
        except AgentUnitError:
            pass  # the score is taken; a failed cleanup is retried by the next reset
        return {"finish_reason": reason, "score": score_info(score), "finish_detail": detail, "limit": ""}

    def _release_episode(self) -> None:
        if self._task is not None:
            self._end_episode()

    def _output_reader(self) -> Callable[[str], str] | None:
        """``observation -> output`` for ``from_output`` reference steps: a module-level
        function (it travels with the reference to other processes); None when the env's
        observations carry no command output to answer with."""
        return None

    def _render_from_output(self, step: ReferenceStep, form: Literal["react", "json"]) -> OutputReply:
        reader = self._output_reader()
        spec = self._tool_table.get(step.tool)
        if reader is None or spec is None or spec.primary is None:
            raise ConfigError(f"reference step {step.tool!r} takes its argument from the previous output, which "
                              f"the {self.domain} env cannot provide for that tool.")
        sentinel_step = ReferenceStep(tool=step.tool, arguments={spec.primary: SENTINEL})
        rendered = self.render_action(sentinel_step, form)
        try:
            return OutputReply.from_rendering(rendered, extract=reader, json_string=form == "json")
        except ValueError as exc:
            raise ConfigError(f"the {self.domain} env cannot render {step.tool!r} with an output filled in: {exc}.") \
                from exc

    def _arguments_of(self, step: ReferenceStep) -> dict[str, Any]:
        if isinstance(step.arguments, dict):
            return dict(step.arguments)
        spec = self._tool_table.get(step.tool)
        if spec is None or spec.primary is None:
            raise ConfigError(f"reference step {step.tool!r} gives a plain value but the tool takes no argument.")
        return {spec.primary: step.arguments}

    def _resolve_tasks(self, tasks: TaskSource) -> list[TaskT]:
        specs: Sequence[TaskSpec | dict[str, Any]]
        if tasks is None:
            specs = self.DOMAIN.bundled_tasks()  # each with its split
        elif isinstance(tasks, (str, Path)):
            specs = self._load_path(Path(tasks))
        else:
            items = list(tasks)
            if all(isinstance(t, TaskSpec) for t in items):
                specs = [t for t in items if isinstance(t, TaskSpec)]
            else:
                paths = [t for t in items if isinstance(t, (str, Path))]
                if len(paths) != len(items):
                    raise ConfigError("tasks mixes task specs and task files; pass a list of one kind.")
                specs = load_tasks(paths, self.task_model)
        return [self._coerce_task(t) for t in specs]

    def _load_path(self, path: Path) -> Sequence[TaskSpec]:
        """Native task files, or a foreign format the domain's description detects (AgentBench's).

        Native files are all-or-nothing (the first bad task raises). A foreign file keeps its
        good items: the ones that do not convert are logged as one warning, and only a path
        with no usable task raises.
        """
        domain = self.DOMAIN
        if domain.detect_format(path) == "native":
            return load_tasks(path, self.task_model)
        result = domain.load_tasks(path)
        if result.problems:
            logger.warning("%d item(s) of %s did not convert and are left out; the first: %s",
                           len(result.problems), path, result.problems[0])
        if not result.tasks:
            result.raise_first()
            raise TaskFileError(str(path), "no task in this file or folder.")
        return result.tasks

    def _coerce_task(self, task: TaskSpec | dict[str, Any]) -> TaskT:
        if not isinstance(task, self.task_model):
            data = task.model_dump() if isinstance(task, TaskSpec) else task
            task = self.task_model.model_validate(data)
        # task_model is a ClassVar, which cannot name the TypeVar, so mypy cannot see that
        # an instance of it is a TaskT; the isinstance check and the validation above are the proof.
        return cast(TaskT, task)

    def _pick_task(self, options: dict[str, Any]) -> TaskT:
        if "task" in options:
            task = self._coerce_task(options["task"])
        elif "task_id" in options:
            wanted = options["task_id"]
            matches = [t for t in self._all_tasks if t.id == wanted]
            if not matches:
                raise TaskNotFoundError(f"no task {wanted!r} in this env's suite of {len(self._all_tasks)} tasks.")
            task = matches[0]
        else:
            pool = self.tasks
            if not pool:
                raise ConfigError(
                    f"no task of this suite runs on the {self.backend_name!r} backend; pick another backend."
                )
            task = pool[int(self.np_random.integers(len(pool)))]
        if not task.supports(self.backend_name):
            note = f" ({task.backend_note})" if task.backend_note else ""
            raise ConfigError(
                f"task {task.id!r} runs on {', '.join(task.backends or ())}, not on {self.backend_name!r}{note}."
            )
        refusal = self._refusal(task)
        if refusal is not None:
            raise ConfigError(f"task {task.id!r} cannot run in this env ({refusal.reason}): {refusal.hint}.")
        if task.needs_network and not self.network:
            what = f" ({task.network_note})" if task.network_note else ""
            raise ConfigError(f"task {task.id!r} needs the network{what}, and this env has none: make it with "
                              "network=True (agentunit-gym eval --network) where the domain allows it.")
        return task
