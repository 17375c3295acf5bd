"""The base of every AgentUnit env: the gymnasium contract, the step flow and the finish protocol.

A domain env fills the hooks below; steps, invalid replies, the step limit and ``info`` are
here, the same for every domain. The rest is in the parts an env is made of: ``env.task_pool``
(:mod:`~agentunit_gym.core.task_pool`), ``env.codec`` (:mod:`~agentunit_gym.core.action_codec`),
and the domain env's :mod:`~agentunit_gym.core.backend_handle` attributes (closed, warmed up
and pickled here).
"""

from __future__ import annotations

import time
from abc import abstractmethod
from dataclasses import replace
from typing import Any, ClassVar, Generic, TypeVar

import gymnasium as gym

from agentunit_gym.core.action_codec import (
    ACTION_FORMATS,
    NO_TOOL_CALL_HINT,
    NO_TOOL_CALL_MESSAGE,
    ActionCodec,
    ActionFormat,
    ReplyForm,
    ToolTable,
    is_tool_call,
    without_grammar,
)
from agentunit_gym.core.actions import Action, ActionError, ActionIssue, Execution, InvalidPolicy, ToolSpec
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.domain import Domain
from agentunit_gym.core.finish import FinishReason, LimitKind, StepLimit
from agentunit_gym.core.info import (
    EndInfo,
    ResetInfo,
    StepInfo,
    StepTiming,
    merge_end,
    running_step_info,
    score_info,
    stable_details,
)
from agentunit_gym.core.score import Score
from agentunit_gym.core.spaces import UnicodeText
from agentunit_gym.core.task_pool import Runner, TaskPool, TaskSource
from agentunit_gym.errors import AgentUnitError, ConfigError, EpisodeStateError, InterruptedEpisodeError
from agentunit_gym.tasks.spec import ReferenceStep, Refusal, TaskSpec

__all__ = ["ACTION_FORMATS", "NO_TOOL_CALL_HINT", "NO_TOOL_CALL_MESSAGE", "ActionFormat", "AgentEnv", "Execution",
           "InvalidPolicy", "StepLimit", "StepTiming", "TaskSource", "is_tool_call", "without_grammar"]

TaskT = TypeVar("TaskT", bound=TaskSpec)


class AgentEnv(gym.Env[str, str], Generic[TaskT]):
    """Base class of the AgentUnit envs.

    Args:
        tasks: the suite: None for the bundled one, task files or folders (native, or a format
            the domain's description detects, e.g. an AgentBench checkout), or task specs.
        max_steps: turn limit; None takes the task's, else the domain's AgentBench default.
        invalid_action: ``"continue"`` (feedback, go on) or ``"terminate"`` (end with IF/IA, AgentBench's).
        render_mode: None or ``"ansi"``.
        split: ``"train"``, ``"test"`` (``"dev"``: AgentBench's data): only that split's tasks (docs/tasks.md).
        action_format: ``"text"``: the domain's grammar or a JSON call; ``"tools"``: tool calls only.

    Raises:
        ConfigError: an unknown option value, or a split no task of the suite is in.
        TaskFileError: a task file that does not validate.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    DOMAIN: ClassVar[Domain]
    """The domain's description (its package's ``DOMAIN``): the one place of the domain's facts."""
    tools: ClassVar[tuple[ToolSpec, ...]]
    grammar: ClassVar[str]
    """How to write actions, shown in ``info`` and in prompts."""
    network: bool = False
    """Whether the backend reaches the network; tasks that need it are otherwise not in :attr:`tasks`."""
    _live_state: ClassVar[tuple[str, ...]] = ()
    """Attributes holding an episode's live resources (a session ...): a pickle carries them as None."""

    def __init__(self, *, tasks: TaskSource = None, max_steps: int | None = None,
                 invalid_action: InvalidPolicy = "continue", render_mode: str | None = None,
                 split: str | None = None, action_format: ActionFormat = "text") -> None:
        if invalid_action not in ("continue", "terminate"):
            raise ConfigError(f"invalid_action must be 'continue' or 'terminate', got {invalid_action!r}.")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}.")
        if action_format not in ACTION_FORMATS:
            raise ConfigError(f"action_format must be 'text' or 'tools', got {action_format!r}: 'tools' for tool "
                              "calls only (no text grammar), 'text' for the domain's text grammar or JSON calls.")
        self._limit = StepLimit(self.DOMAIN.step_limit, given=max_steps)  # checks max_steps, before the tasks load
        self.render_mode, self.invalid_action, self.split = render_mode, invalid_action, split
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.domain, self.task_model = self.DOMAIN.name, self.DOMAIN.task_model  # the domain's facts
        self.default_max_steps = self.DOMAIN.step_limit
        self.task_pool: TaskPool[TaskT] = TaskPool(self.DOMAIN, tasks, split)
        self.suite: tuple[TaskT, ...] = self.task_pool.suite  # every task, whether the backend runs it or not
        self.codec = ActionCodec(self.tools, self.domain)  # a domain env may replace it (an output reader)
        self.tool_table: ToolTable = self.codec.tool_table
        self.task: TaskT | None = None
        self.steps = 0
        self.finish_reason: FinishReason | None = None  # None while the episode runs
        self.max_steps = self._limit.of(None)
        self._score_value: Score | None = None
        self._closed = False
        self._last_observation = ""
        self._interrupted = ""
        self.require_tool_calls(action_format == "tools")

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

    def _refusal(self, task: TaskT) -> Refusal | None:
        """Why this env cannot run ``task`` for a reason of its domain (the OS env: a task that
        switches users, on a sandbox that maps one uid); None: every task its backend supports."""
        return None

    def _end_episode(self) -> None:
        """Release per-episode resources (an episode database, ...). Must be idempotent."""

    @property
    def tasks(self) -> list[TaskT]:
        """The tasks this env can run (:meth:`not_runnable` has no reason against them)."""
        return self.task_pool.runnable(Runner(self.backend_name, self.network, self._refusal))

    def not_runnable(self, task: TaskT) -> str | None:
        """Why this env cannot run ``task``, None when it can: a backend the task does not run
        on, then the domain's own reason (:meth:`_refusal`), then the network it lacks.

        Example: ``"not run on local: runs only on docker"``.
        """
        return Runner(self.backend_name, self.network, self._refusal).why_not(task)

    def refusals(self) -> list[tuple[TaskT, Refusal]]:
        """The suite's tasks that run on this backend but that the env refuses for a reason of
        its domain (for the run's one-line note, :func:`~agentunit_gym.tasks.spec.left_out_note`)."""
        return self.task_pool.refusals(Runner(self.backend_name, self.network, self._refusal))

    def cap_steps(self, max_episode_steps: int) -> None:
        """Make ``max_episode_steps`` the turn limit, so the prompt, ``info["max_steps"]`` and the end
        agree with the ``TimeLimit`` of ``gym.make(..., max_episode_steps=N)`` (from the next reset).

        Raises:
            ConfigError: a cap below 1.
        """
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int) or max_episode_steps < 1:
            raise ConfigError(f"max_episode_steps must be an integer of at least 1, got {max_episode_steps!r}.")
        self._limit = replace(self._limit, cap=max_episode_steps)
        self.max_steps = self._limit.of(self.task.max_steps if self.task is not None else None)

    def require_tool_calls(self, required: bool = True) -> None:
        """Function-calling mode (``eval --protocol agentbench-fc``): only tool calls are actions
        (docs/core.md, "Tool-calls-only mode"; :func:`~agentunit_gym.core.action_codec.is_tool_call`).

        The prompt leaves out the grammar (``info["grammar"]`` is ``""``); any other reply is
        answered with AgentBench FC's words (issue ``no_call``), takes a turn, never ends the
        episode. Sets :attr:`tool_calls_only` and :attr:`action_format` (``tools``/``text``)."""
        self.tool_calls_only = required
        self.action_format: ActionFormat = "tools" if required else "text"

    def warm_up(self) -> None:
        """Start the backend ahead of the first ``reset()`` (which would anyway), so env copies
        made side by side (the evaluator's) do not all pay a container's start at once.

        Raises:
            BackendError: the backend could not be started (``reset()`` would raise the same).
        """
        if self._closed:
            raise EpisodeStateError("this env is closed")
        for handle in BackendHandle.held_by(self):
            handle.warm()

    def parse_action(self, text: str) -> Action | ActionError:
        """Turn a raw reply into an action, or say why it is not one (no side effects). A domain
        env that checks an action against its state overrides it and checks what this returns."""
        return self.codec.parse(text, self._parse_react, tools_only=self.tool_calls_only)

    def render_action(self, step: ReferenceStep, form: ReplyForm | None = None) -> str:
        """Write a reference step as the agent would send it (the oracle's): ``form`` None is a
        JSON call in tool-calls-only mode, else the ReAct grammar; a ``from_output`` step an
        :class:`~agentunit_gym.core.reference.OutputReply`.

        Raises:
            ConfigError: the step does not fit the tool, or asks for an output this env cannot read.
        """
        return self.codec.render(step, self._render_react, form or ("json" if self.tool_calls_only else "react"))

    def end_episode(self, reason: FinishReason, *, detail: str = "") -> EndInfo:
        """End the running episode for ``reason`` (used by limit and policy wrappers).

        Returns:
            The ``info`` entries of the end (:class:`~agentunit_gym.core.info.EndInfo`):
            ``finish_reason``, ``score``, ``finish_detail`` and ``limit`` (``""``: the caller names it).

        Raises:
            EpisodeStateError: no episode is running.
        """
        if self.task is None or self.finish_reason is not None:
            raise EpisodeStateError("end_episode() needs a running episode.")
        if reason is FinishReason.COMPLETE:
            raise ConfigError("COMPLETE is reached through a committing action, not end_episode().")
        score = self._score(None)
        if score.success:
            # Success needs a commit; state that happens to be right is recorded, not rewarded.
            score = Score(reward=0.0, success=False, components={**score.components, "state_correct": True},
                          detail=f"ended with {reason.abbreviation} before committing")
        return _record_end(self, reason, score, detail)

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]; ResetInfo is one
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, ResetInfo]:
        """Start an episode.

        Args:
            seed: seeds the env's RNG, which picks the task when none is named.
            options: ``{"task_id": ...}`` or ``{"task": TaskSpec | dict}`` picks the task;
                ``"sticky": True`` pins it for the autoresets that follow
                (:mod:`~agentunit_gym.core.task_pin`); no other key.

        Returns:
            The prompt, and ``info`` (a :class:`~agentunit_gym.core.info.ResetInfo`).

        Raises:
            ResetOptionError, LostResetOptionsError, TaskNotFoundError, ConfigError: no task for
                this reset (:meth:`~agentunit_gym.core.task_pool.TaskPool.choose`); the episode stays.
        """
        super().reset(seed=seed)
        if self._closed:
            raise EpisodeStateError("reset() after close(): make a new env.")
        ended = self.task is not None and self.finish_reason is not None
        task = self.task_pool.choose(seed, options, episode_ended=ended, rng=self.np_random,
                                     runner=Runner(self.backend_name, self.network, self._refusal))
        if self.task is not None:
            self._end_episode()
        self.task, self.steps, self.finish_reason, self._score_value, self._interrupted = task, 0, None, None, ""
        self.max_steps = self._limit.of(task.max_steps)
        started = time.perf_counter()
        prompt = self._start_episode(task)
        if self.tool_calls_only:
            prompt = without_grammar(prompt, self.grammar)
        self._last_observation = prompt
        info: ResetInfo = {
            "task_id": task.id, "instruction": task.instruction, "category": task.category, "domain": self.domain,
            "backend": self.backend_name, "split": task.split or "", "max_steps": self.max_steps,
            "optimal_steps": task.k_opt, "tools": [t.json_schema() for t in self.tools],
            "grammar": "" if self.tool_calls_only else self.grammar, "step": 0, "finish_reason": "",
            "timing": StepTiming(time.perf_counter() - started), "backend_limits_off": self.backend_limits_off,
        }
        return prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:  # type: ignore[override]
        """Parse the agent's reply, act on it, observe.

        Returns:
            ``(observation, reward, terminated, truncated, info)``; ``info`` is a
            :class:`~agentunit_gym.core.info.StepInfo`, every key on every step (docs/core.md).

        Raises:
            EpisodeStateError: step before reset or after the episode ended.
            InterruptedEpisodeError: step on a pickled or copied env before its ``reset()``.
            BackendError, BackendTimeoutError, BackendUnavailableError: infrastructure failed;
                the episode is over (finish reason ERROR) and the next reset recovers.
        """
        if self._closed:
            raise EpisodeStateError("step() after close(): make a new env.")
        if self.task is None and self._interrupted:
            raise InterruptedEpisodeError(
                f"step() on a copy of the env made while episode {self._interrupted!r} was running: the "
                "episode's backend state (shell, database, session) does not travel in a pickle or a copy. "
                "Call reset() on the copy first (reset(options={'task_id': ...}) to run that task again).")
        if self.task is None:
            raise EpisodeStateError("step() before reset(): call reset() first.")
        if self.finish_reason is not None:
            raise EpisodeStateError(f"step() after the episode ended ({self.finish_reason.value}): call reset() first.")
        started = time.perf_counter()
        self.steps += 1
        self.task_pool.pin.stepped()
        info = running_step_info(self.steps, self.task.id, self.max_steps, backend_limits_off=self.backend_limits_off)
        terminated = truncated = False
        try:
            parsed = self.parse_action(action)
            if isinstance(parsed, ActionError):
                observation = parsed.feedback()
                info["action_error"] = parsed.to_info()
                # Tool-calls-only mode answers a reply without a call and goes on, as AgentBench FC's loop does.
                answered = self.tool_calls_only and parsed.issue is ActionIssue.NO_CALL
                if self.invalid_action == "terminate" and not answered:
                    merge_end(info, self.end_episode(parsed.reason, detail=parsed.message))
                    terminated = True
            else:
                info["action"] = parsed.to_info()
                info["thought"] = parsed.thought or ""
                if self.tool_table[parsed.tool].commits:
                    score = self._score(parsed)
                    merge_end(info, _record_end(self, FinishReason.COMPLETE, score, score.detail))
                    observation = "Episode finished."
                    terminated = True
                else:
                    execution = self._execute(parsed)
                    observation = execution.observation
                    info["execution"] = stable_details(dict(execution.details))
                    info["execution_error"] = bool(execution.error)
            if not terminated and self.steps >= self.max_steps:
                limit = f"step limit {self.max_steps} reached"
                merge_end(info, self.end_episode(FinishReason.TASK_LIMIT, detail=limit))
                info["limit"] = LimitKind.STEPS
                truncated = True
        except AgentUnitError:
            self.finish_reason = FinishReason.ERROR
            raise
        reward = self._score_value.reward if self._score_value is not None else 0.0
        info["timing"] = StepTiming(time.perf_counter() - started)
        self._last_observation = observation
        return observation, reward, terminated, truncated, info

    def render(self) -> str | None:  # the last observation in ``ansi`` mode, else None
        return self._last_observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Release every container, connection and temp dir (of the backends it opened). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.task is not None:
                self._end_episode()
        finally:
            for handle in BackendHandle.held_by(self):
                handle.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __getstate__(self) -> dict[str, Any]:
        """The env without live resources or a running episode (docs/training.md, "Pickling"): backend
        handles as they travel (a copy reopens its own), :attr:`_live_state` None, the pin kept.

        Raises:
            ConfigError: the env was made around a backend object it cannot reopen.
        """
        state = {name: value.travelling() if isinstance(value, BackendHandle) else value
                 for name, value in vars(self).items()}
        state.update(dict.fromkeys(self._live_state))
        running = self.task is not None and self.finish_reason is None and not self._closed
        state.update(task=None, finish_reason=None, _score_value=None, steps=0, max_steps=self._limit.of(None),
                     _interrupted=self.task.id if running and self.task is not None else "",
                     task_pool=self.task_pool.travelling())
        return state


def _record_end(env: AgentEnv[Any], reason: FinishReason, score: Score, detail: str) -> EndInfo:
    """End ``env``'s episode with ``score``, release its resources: the ``info`` entries of the end."""
    env.finish_reason, env._score_value = reason, score
    try:
        env._end_episode()
    except AgentUnitError:
        pass  # the score is taken; a failed cleanup is retried by the next reset
    return {"finish_reason": reason, "score": score_info(score), "finish_detail": detail, "limit": ""}
