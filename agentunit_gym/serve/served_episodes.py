"""Episodes played by remote agents: one standard env stack per session, tool calls as steps,
and the record at the end in the evaluator's format.

Nothing here knows a protocol: :mod:`agentunit_gym.serve.mcp_server` maps MCP sessions and tool
calls onto :class:`EpisodePool` and :class:`ServedEpisode`. Every call is synchronous (the
env steps block); an async server runs them in a worker thread.

Example:

    >>> import tempfile
    >>> folder = tempfile.TemporaryDirectory()
    >>> pool = EpisodePool(EpisodeSettings("AgentUnit/DB-v0", backend="sqlite", task_id="db-weather-03",
    ...                                    output=Path(folder.name)))
    >>> episode = pool.get("session-1")
    >>> print(episode.prompt[-46:])             # the task, as the env's reset shows it
    temp_min (real), wind (real), weather (text).
    >>> outcome = episode.call("execute_sql", {"query": "SELECT MIN(temp_min) FROM seattle_weather"})
    >>> outcome.text, outcome.is_error, outcome.ended
    ('[(-3.2,)]', False, False)
    >>> outcome = episode.call("submit_answer", {"answer": ["-3.2"]})
    >>> outcome.ended, outcome.result["finish_reason"], outcome.result["success"]
    (True, 'complete', True)
    >>> pool.close()                            # ends and records what is still running
    >>> len((Path(folder.name) / "episodes.jsonl").read_text().splitlines())   # the record, as eval writes it
    1
    >>> folder.cleanup()
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

from agentunit_gym.core import registry
from agentunit_gym.core.actions import ToolSpec, render_json_call
from agentunit_gym.core.domain import ToolAlias
from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import AgentUnitError, ConfigError, EpisodeStateError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.plan.routing import backend_for, full_env_id
from agentunit_gym.eval.record.records import EpisodeRecord, RecordWriter, RunPaths
from agentunit_gym.wrappers.aliases import RenameTools
from agentunit_gym.wrappers.ending import end_episode
from agentunit_gym.wrappers.info import agent_env
from agentunit_gym.wrappers.protocols import DEFAULT_PROTOCOL, ProtocolName, default_invalid_policy
from agentunit_gym.wrappers.stack import make_eval_env

logger = logging.getLogger("agentunit_gym")

AGENT_LABEL = "mcp"
"""The ``agent`` of records made by served episodes (``mcp:<client name>`` when the client names itself)."""

ABANDONED = "the session closed before the episode ended"


@dataclass(frozen=True)
class EpisodeSettings:
    """What every episode of a server plays.

    Attributes:
        env_id: a registered env id (``DB-v0`` is short for ``AgentUnit/DB-v0``).
        backend: the env's backend (``auto`` lets the env pick).
        task_id: the task of every episode; None lets the seed pick one from the suite.
        seed: reset seed of the first episode (the n-th uses ``seed + n``); None draws one
            at random per episode (recorded, so the episode can be replayed).
        output: a run folder to record episodes in (``episodes.jsonl``, ``traces/``), as
            ``agentunit-gym eval`` does; None records nothing.
        full_text: record whole texts in traces instead of capping them at 4000 characters.
        protocol: the evaluation protocol every episode plays under (``agentbench``: AgentBench's
            endings, turn limit and caps; ``agentbench-fc``: also its tool names), applied by
            :func:`~agentunit_gym.wrappers.stack.make_eval_env` as ``agentunit-gym eval`` does.
        agentbench_root: an AgentBench checkout whose prompts open each episode under ``agentbench``.
    """

    env_id: str
    backend: str = "auto"
    task_id: str | None = None
    seed: int | None = None
    output: Path | None = None
    full_text: bool = False
    protocol: ProtocolName = DEFAULT_PROTOCOL
    agentbench_root: str | None = None

    def eval_config(self) -> EvalConfig:
        """The run settings written to the output's ``config.json`` (the export and report read it)."""
        return EvalConfig(envs=(self.env_id,), agent=AGENT_LABEL, backends=(self.backend,),
                          task_ids=(self.task_id,) if self.task_id else (), seed=self.seed or 0,
                          full_text=self.full_text, concurrency=1, protocol=self.protocol,
                          invalid_action=default_invalid_policy(self.protocol), agentbench_root=self.agentbench_root)


@dataclass(frozen=True)
class ServedTool:
    """A tool as a remote agent sees it: the env's own, or its name under a protocol that renames it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    """The JSON schema of the arguments."""
    commits: bool = False
    """Calling it ends the episode (answer, finish, submit)."""

    @classmethod
    def of(cls, tool: ToolSpec | ToolAlias, commits: bool = False) -> ServedTool:
        """From an env tool, or from a protocol's alias of one (``commits``: the env tool's)."""
        schema = tool.schema if isinstance(tool, ToolAlias) else tool.json_schema()
        function = schema["function"]
        return cls(str(function["name"]), str(function.get("description", "")),
                   json.loads(json.dumps(function.get("parameters", {}), default=dict)),
                   tool.commits if isinstance(tool, ToolSpec) else commits)


def served_tools(env: gym.Env[str, str]) -> list[ServedTool]:
    """The tools of ``env``'s stack as agents call them: a protocol's names when it renames them
    (:class:`~agentunit_gym.wrappers.aliases.RenameTools`), else the env's own tool table."""
    base = agent_env(env)
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, RenameTools):
            table = base.tool_table
            return [ServedTool.of(alias, table[alias.tool].commits) for alias in layer.aliases]
        layer = layer.env
    return [ServedTool.of(spec) for spec in base.tools]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call returns to the remote agent.

    Attributes:
        text: the observation (or why the call was refused).
        is_error: the call was not a valid action (the env's invalid-action feedback), or came
            after the episode ended.
        ended: the episode is over (this call ended it, or it had ended before).
        result: at the end, ``{finished, finish_reason, reward, success, score, steps, task_id, detail,
            error}``; ``reward``, ``success`` and ``score`` are None for an episode without a score
            (the infrastructure failed: ``finish_reason`` ``error``, and ``error`` says what failed;
            a failure is never a reward of 0).
    """

    text: str
    is_error: bool = False
    ended: bool = False
    result: dict[str, Any] | None = None


class RunRecorder:
    """Writes finished episodes to a run folder with the evaluator's own writer (thread-safe)."""

    def __init__(self, root: Path, config: EvalConfig) -> None:
        paths = RunPaths(root)
        if root.exists() and not root.is_dir():
            raise ConfigError(f"--output must be a folder, and {root} is a file: give a folder (it is created).")
        root.mkdir(parents=True, exist_ok=True)
        if not paths.config.exists():
            paths.config.write_text(config.model_dump_json(indent=2), encoding="utf-8")
        self._writer = RecordWriter(paths)
        self._lock = threading.Lock()
        self.root = root
        # What close() needs, loaded now: a stdio client gives the server two seconds after it
        # closes the pipe (then SIGTERM), and these imports alone can take that on a loaded machine.
        import scipy.stats  # noqa: F401

        from agentunit_gym.eval.report import html, summary  # noqa: F401
        self.written = 0

    def write(self, record: EpisodeRecord, trace: EpisodeTrace | None) -> EpisodeRecord:
        with self._lock:
            self.written += 1
            return self._writer.write(record, trace)

    def close(self) -> None:
        """Close the record file; when this server recorded episodes, write the run's
        ``summary.json`` and ``report.html`` (over every episode of the folder), as an eval run ends."""
        with self._lock:
            self._writer.close()
            if not self.written:
                return
            from agentunit_gym.eval.report.html import write_report
            from agentunit_gym.eval.report.summary import summarize

            try:
                summarize(self.root)
                write_report(self.root)
            except (AgentUnitError, OSError, ValueError) as exc:  # the records are safe; the summary can wait
                logger.warning("could not write the summary and report of %s: %s", self.root, exc)


EnvFactory = Callable[[EpisodeSettings], gym.Env[str, str]]


def standard_env(settings: EpisodeSettings) -> gym.Env[str, str]:
    """The evaluator's standard stack (limits, classification, loops, traces) for ``settings``.

    Raises:
        ConfigError: an unknown env id, or a backend that is not one of the env's.
    """
    env_id = full_env_id(settings.env_id)
    domain = registry.domain_of_env(env_id)
    if domain is None:
        raise ConfigError(f"no registered env {settings.env_id!r}: use one of {', '.join(registry.env_ids())}.")
    backend = backend_for(env_id, [settings.backend]) if settings.backend != "auto" else "auto"
    if backend != settings.backend:
        raise ConfigError(f"backend {settings.backend!r} is not one of {env_id}'s: use auto or "
                          f"{', '.join(domain.backend_names)}.")
    return make_eval_env(env_id, protocol=settings.protocol, agentbench_root=settings.agentbench_root,
                         backend=backend, trace_max_chars=None if settings.full_text else 4000,
                         trace_metadata={"served": "mcp"})


@dataclass
class ServedEpisode:
    """One episode of one session: the env stack, its prompt, its end.

    Use :meth:`call` for each tool call and :meth:`abandon` when the session goes away first.
    Calls are serialised by a lock (a client may send calls in parallel; an env steps one at a time).
    """

    env: gym.Env[str, str]
    env_id: str
    seed: int
    run: int
    recorder: RunRecorder | None = None
    agent: str = AGENT_LABEL
    prompt: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    last_used: float = field(default_factory=time.monotonic)
    _result: dict[str, Any] | None = None
    _steps: int = 0
    _started: float = field(default_factory=time.time)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, task_id: str | None) -> None:
        options = {"task_id": task_id} if task_id else None
        self.prompt, self.info = self.env.reset(seed=self.seed, options=options)

    @property
    def task_id(self) -> str:
        return str(self.info.get("task_id", ""))

    @property
    def tools(self) -> list[ServedTool]:
        return served_tools(self.env)

    @property
    def ended(self) -> bool:
        return self._result is not None

    @property
    def result(self) -> dict[str, Any] | None:
        """The end (finish reason, reward, score ...) once the episode is over, else None."""
        return dict(self._result) if self._result is not None else None

    def call(self, tool: str, arguments: dict[str, Any] | None) -> ToolOutcome:
        """Run a tool call as the env's JSON tool-call action.

        Returns:
            The observation; ``is_error`` for an invalid call (the session goes on as the env
            does) or a call after the end; at the end, ``result`` with the score.

            An infrastructure failure (a backend that died) ends the episode with finish reason
            ``error``, recorded as ``infra_error``, and comes back as an error result.
        """
        with self._lock:
            self.last_used = time.monotonic()
            if self._result is not None:
                return ToolOutcome(after_end_message(self._result), is_error=True, ended=True,
                                   result=dict(self._result))
            self._steps += 1
            try:
                observation, _reward, terminated, truncated, info = self.env.step(
                    render_json_call(tool, dict(arguments or {})))
            except AgentUnitError as exc:
                failure = f"{type(exc).__name__}: {exc}"
                result = self._finish({"finish_reason": FinishReason.ERROR,
                                       "finish_detail": f"the environment failed: {failure}"},
                                      status="infra_error", error=failure)
                return ToolOutcome(f"The environment failed while running this call ({failure}). The episode is "
                                   "over, without a score: open a new session to play another.",
                                   is_error=True, ended=True, result=dict(result))
            invalid = bool(info.get("action_error"))  # {} when the reply parsed (info keys keep one type)
            if not (terminated or truncated):
                return ToolOutcome(observation, is_error=invalid)
            result = self._finish(info, status="done")
            return ToolOutcome(f"{observation}\n\n{end_message(result)}", is_error=invalid, ended=True,
                               result=dict(result))

    def abandon(self, detail: str = ABANDONED) -> None:
        """End a running episode whose session went away (recorded as an agent error when it took
        a step; an episode nobody played is dropped), then close the env. Idempotent."""
        with self._lock:
            if self._result is None:
                info: dict[str, Any] = {"finish_reason": FinishReason.ERROR, "finish_detail": detail}
                if self._steps > 0:
                    try:
                        info = {**end_episode(self.env, FinishReason.ERROR, detail=detail)}
                    except EpisodeStateError:
                        pass
                self._finish(info, status="agent_error", error=detail, write=self._steps > 0)
            self._close_env()  # idempotent: an ended episode closed it already

    def _finish(self, info: dict[str, Any], *, status: Literal["done", "agent_error", "infra_error"],
                error: str = "", write: bool = True) -> dict[str, Any]:
        reason = info.get("finish_reason")
        score = info.get("score") if isinstance(info.get("score"), dict) else None
        result: dict[str, Any] = {
            "finished": True,
            "finish_reason": reason.value if isinstance(reason, FinishReason) else (reason or "error"),
            "reward": float(score["reward"]) if score else None,
            "success": bool(score["success"]) if score else None,
            "score": score,
            "steps": self._steps,
            "task_id": self.task_id,
            "detail": str(info.get("finish_detail") or ""),
            "error": error,
        }
        self._result = result
        trace = info.get("trace") if isinstance(info.get("trace"), EpisodeTrace) else None
        if self.recorder is not None and write:
            if trace is not None and trace.seed is None:
                trace = trace.model_copy(update={"seed": self.seed})
            record = EpisodeRecord(
                key=f"{self.env_id}|{self.task_id}|mcp-{self.episode_id}", env_id=self.env_id,
                task_id=self.task_id, run=self.run, seed=self.seed, agent=self.agent,
                status=status, success=bool(result["success"]),
                reward=result["reward"] or 0.0, finish_reason=result["finish_reason"], steps=self._steps,
                wall_s=time.time() - self._started, error=error, split=str(self.info.get("split") or ""),
                backend=str(self.info.get("backend") or ""))
            self.recorder.write(record, trace)
        self._close_env()  # free the backend now; the episode object answers later calls
        return result

    def _close_env(self) -> None:
        try:
            self.env.close()
        except AgentUnitError as exc:  # the episode is over either way; a failed cleanup is not the agent's
            logger.warning("closing the env of episode %s failed: %s", self.episode_id, exc)


def end_message(result: dict[str, Any]) -> str:
    """The line that tells the agent how its episode ended."""
    return (f"Episode finished ({result['finish_reason']}): reward {_reward_text(result)}, "
            f"success {str(result['success']).lower()}, {result['steps']} step(s).")


def after_end_message(result: dict[str, Any]) -> str:
    """What a call after the end reads."""
    why = f"; {result['detail']}" if result.get("detail") else ""
    return (f"The episode has already ended ({result['finish_reason']}, reward {_reward_text(result)}{why}): this "
            "session takes no more tool calls. Open a new MCP session to play another episode.")


def _reward_text(result: dict[str, Any]) -> str:
    """The reward as the agent reads it: ``none`` for an episode the infrastructure ended unscored."""
    return "none" if result["reward"] is None else f"{result['reward']:g}"


class EpisodePool:
    """The episodes of a server, one per session key, made when a session first needs one.

    Args:
        settings: what every episode plays.
        max_sessions: episodes open at once; a new session beyond it is refused.
        idle_timeout_s: an episode whose session sent nothing for this long is abandoned
            (checked whenever a session asks for its episode); None keeps them.
        env_factory: makes one env stack (default: the evaluator's standard stack).

    Raises:
        ConfigError: ``max_sessions`` below 1, an output that is a file, or a task this backend cannot run.
        TaskNotFoundError: ``settings.task_id`` is not in the env's suite.
    """

    def __init__(self, settings: EpisodeSettings, *, max_sessions: int = 16, idle_timeout_s: float | None = 1800.0,
                 env_factory: EnvFactory = standard_env) -> None:
        if max_sessions < 1:
            raise ConfigError(f"max_sessions must be at least 1, got {max_sessions}.")
        self.settings = settings
        self.env_id = full_env_id(settings.env_id)
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._factory = env_factory
        self._recorder = RunRecorder(settings.output, settings.eval_config()) if settings.output else None
        self._episodes: dict[str, ServedEpisode] = {}
        self._lock = threading.Lock()
        self._made = 0
        self._closed = False
        self._spare: gym.Env[str, str] | None = env_factory(settings)
        self.tools: list[ServedTool] = served_tools(self._spare)
        """The tools agents call (every episode has the same): the env's, or the protocol's names."""
        if settings.task_id:
            try:  # an unknown task, or one this backend cannot run, is refused now, not in a session
                self._spare.reset(seed=0, options={"task_id": settings.task_id})
            except BaseException:
                self._spare.close()
                raise

    def get(self, key: str, *, agent: str = AGENT_LABEL) -> ServedEpisode:
        """The episode of session ``key``, started (reset) on first use.

        Raises:
            EpisodeStateError: the pool is closed, or ``max_sessions`` episodes are open.
            TaskNotFoundError, ConfigError: the task cannot run on this env.
        """
        self.reap_idle()
        with self._lock:
            if self._closed:
                raise EpisodeStateError("the server is shutting down: no new episodes.")
            episode = self._episodes.get(key)
            if episode is not None:
                episode.last_used = time.monotonic()
                return episode
            running = sum(not e.ended for e in self._episodes.values())
            if running >= self.max_sessions:
                raise EpisodeStateError(
                    f"{running} episodes are running, the most this server holds (--max-sessions "
                    f"{self.max_sessions}): close a session (or wait for idle ones to expire), then try again.")
            env, self._spare = (self._spare, None) if self._spare is not None else (None, None)
            run = self._made
            self._made += 1
        if env is None:
            env = self._factory(self.settings)
        seed = self.settings.seed + run if self.settings.seed is not None else secrets.randbelow(2**31)
        episode = ServedEpisode(env=env, env_id=self.env_id, seed=seed, run=run, recorder=self._recorder,
                                agent=agent)
        try:
            episode.start(self.settings.task_id)
        except BaseException:
            env.close()
            raise
        with self._lock:
            self._episodes[key] = episode
        return episode

    def release(self, key: str, detail: str = ABANDONED, *, forget: bool = False) -> None:
        """End session ``key``'s episode (abandoned, if it still runs) and close its env.

        The ended episode stays, so the session's later calls are told it ended, unless
        ``forget`` (the session itself is gone and cannot call again).
        """
        with self._lock:
            episode = self._episodes.pop(key, None) if forget else self._episodes.get(key)
        if episode is not None:
            episode.abandon(detail)

    def reap_idle(self) -> None:
        """Abandon the running episodes whose session has been idle past ``idle_timeout_s``."""
        if self.idle_timeout_s is None:
            return
        limit = time.monotonic() - self.idle_timeout_s
        with self._lock:
            idle = [k for k, e in self._episodes.items() if not e.ended and e.last_used < limit]
        for key in idle:
            self.release(key, f"the session was idle for more than {self.idle_timeout_s:g} s")

    def close(self) -> None:
        """Abandon every open episode, close every env and the record file. Idempotent."""
        with self._lock:
            self._closed = True
            keys = list(self._episodes)
            spare, self._spare = self._spare, None
        for key in keys:
            self.release(key, "the server stopped before the episode ended")
        if spare is not None:
            spare.close()
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None


__all__ = ["ABANDONED", "AGENT_LABEL", "EpisodePool", "EpisodeSettings", "RunRecorder", "ServedEpisode",
           "ServedTool", "ToolOutcome", "after_end_message", "end_message", "served_tools", "standard_env"]
