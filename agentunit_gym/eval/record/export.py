"""Trajectories for trainers: one row per episode, as chat messages, in JSON Lines or Parquet.

:func:`export_run` reads a finished run folder (``episodes.jsonl`` and ``traces/``, as
``agentunit-gym eval`` writes them) and writes one row per finished episode;
:func:`trajectory_row` builds a row from a conversation (the export and
``examples/rollouts.py`` both use it, so the columns have one definition) and
:func:`write_rows` writes rows. The conversation is rebuilt with
:class:`~agentunit_gym.core.chat.ChatTranscript`, the builder the built-in OpenAI agent sends
its model, from what the trace recorded (the prompt, each reply with the model's own message
when the agent gave one, each observation).

The columns (:data:`TRAJECTORY_COLUMNS`) follow the names the trainers' dataset loaders read:
``prompt`` (the opening messages, up to the task), ``data_source``, ``agent_name``,
``reward_model`` and ``extra_info`` (with ``tools_kwargs`` and ``interaction_kwargs``) as verl's
RL datasets and agent loop read them (:mod:`agentunit_gym.eval.record.trainer_columns`), ``env_class``
and ``reward_spec`` as SkyRL's, ``messages`` and ``tools`` as verl's multi-turn SFT dataset's
keys; the rest are ours.

Example (a run of two oracle episodes, exported as JSON Lines; ``db.parquet`` would write Parquet):

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from agentunit_gym.eval.agents.builtin import OracleAgent
    >>> from agentunit_gym.eval.run.runner import run_episodes
    >>> folder = tempfile.TemporaryDirectory()
    >>> run = Path(folder.name) / "run"       # as results/<run> of `agentunit-gym eval`
    >>> _ = run_episodes(EvalConfig(envs=("DB-v0",), backends=("sqlite",), n=2), OracleAgent, "oracle", run)
    >>> result = export_run(run, Path(folder.name) / "db.jsonl")
    >>> result.rows, result.truncated   # rows written, episodes whose trace text was cut
    (2, 0)
    >>> row = json.loads(result.path.read_text().splitlines()[0])
    >>> row["env_class"], row["success"], [message["role"] for message in row["messages"]][:3]
    ('AgentUnit/DB-v0', True, ['system', 'user', 'assistant'])
    >>> folder.cleanup()
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentunit_gym.core import registry
from agentunit_gym.core.actions import looks_like_json_call
from agentunit_gym.core.chat import ChatStyle, ChatTranscript
from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import AgentUnitError, ConfigError, MissingDependencyError
from agentunit_gym.eval.plan.config import EvalConfig
from agentunit_gym.eval.record.records import RunPaths, load_trace, read_records
from agentunit_gym.eval.record.trainer_columns import (
    VERL_AGENT_NAME,
    episode_kwargs,
    interaction_kwargs,
    reward_model,
    tool_names,
    tools_kwargs,
)
from agentunit_gym.tasks.spec import AnswerKey, TaskSpec

ExportFormat = Literal["jsonl", "parquet"]

EXPORT_FORMATS: tuple[str, ...] = ("jsonl", "parquet")

TRAJECTORY_COLUMNS: dict[str, str] = {
    "data_source": "the env id (verl picks its reward function by it)",
    "agent_name": "the verl agent loop that plays the row (tool_agent: verl's ToolAgentLoop)",
    "prompt": "the opening messages: system, the worked example, the task as a user message",
    "messages": "the whole conversation: the prompt, then each reply (assistant) and observation (user or tool)",
    "tools": "JSON text of the tool schemas the agent was shown (OpenAI function-calling form)",
    "env_class": "the env id (SkyRL's name for the env an item runs in)",
    "reward_spec": "{method: 'env', ground_truth: task id}: the env scores the episode (SkyRL)",
    "reward_model": "{style, ground_truth}: the gold answer as JSON text where the task has one (DB SELECT, KG; "
                    "style rule when the reply's text states it: DB), else '' with style env (verl)",
    "extra_info": "{index, task_id, env_id, split, seed, backend, episode, tool_selection, tools_kwargs, "
                  "interaction_kwargs}: verl's and SkyRL's per-item extras; the last three as verl's agent loop "
                  "reads them",
    "env_id": "the env id",
    "task_id": "the task id",
    "split": "the task's split (train, test, dev); empty when the task has none",
    "backend": "the backend the episode ran on (sqlite, mysql, local, docker, embedded ...)",
    "seed": "the episode's reset seed",
    "reward": "the episode's return (the terminal domain score unless shaping is on)",
    "rewards": "the reward of each step, in order",
    "success": "whether the task counts as solved",
    "score": "JSON text of the score: reward, success, every component of the domain metric, detail",
    "finish_reason": "complete, context_limit, invalid_format, invalid_action, task_limit or error",
    "steps": "the number of steps",
    "agent": "the agent that played the episode",
    "text_truncated": "true when a text of the episode was cut at the trace cap (run the eval with --full-text)",
}
"""Every column of a row, with its meaning (docs/training.md, "Exporting trajectories")."""

PYARROW_PURPOSE = "writing Parquet (agentunit-gym export --format parquet)"

_CUT_NOTE = re.compile(r"\n\[\.\.\. \d+ more characters not recorded\]\Z")
"""The note :data:`~agentunit_gym.wrappers.trace.TRACE_NOTE` leaves after a cut text."""


@dataclass
class ExportResult:
    """What an export wrote."""

    path: Path
    rows: int
    truncated: int
    """Rows whose episode had a text cut at the trace cap."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Episodes not exported, by reason (``agent_error``, ``infra_error``, ``task_error``, ``no trace``)."""


def trajectory_row(messages: Sequence[Mapping[str, Any]], *, prompt_length: int, env_id: str, task_id: str,
                   split: str = "", seed: int | None, rewards: Sequence[float], reward: float, success: bool,
                   score: Mapping[str, Any] | None, finish_reason: str | None, tools: Sequence[Any] = (),
                   agent: str = "", index: int = 0, episode: str = "", text_truncated: bool = False,
                   backend: str = "", answer: AnswerKey | None = None,
                   agent_name: str = VERL_AGENT_NAME) -> dict[str, Any]:
    """One row of :data:`TRAJECTORY_COLUMNS` for an episode's conversation.

    Args:
        messages: the whole conversation (chat messages).
        prompt_length: how many of the first messages are the prompt (system, example, task).
        env_id, task_id, split, seed, backend: where the episode comes from.
        rewards: each step's reward.
        reward: the episode's return.
        success, score, finish_reason: how it ended (``score`` as the env's ``info["score"]``).
        tools: the tool schemas the agent was shown.
        agent, index, episode: who played it, the row's position, the run's episode key.
        text_truncated: a text of the conversation was cut.
        answer: the task's answer key (``task.answer_key()``), None when it has none.
        agent_name: the verl agent loop named in the row.

    Returns:
        The row, a dict of plain JSON values.
    """
    conversation = [dict(m) for m in messages]
    identity = episode_kwargs(env_id, task_id, seed=seed, split=split, backend=backend)
    return {
        "data_source": env_id,
        "agent_name": agent_name,
        "prompt": conversation[:prompt_length],
        "messages": conversation,
        "tools": json.dumps(list(tools), ensure_ascii=False),
        "env_class": env_id,
        "reward_spec": {"method": "env", "ground_truth": task_id},
        "reward_model": reward_model(answer),
        "extra_info": {"index": index, "task_id": task_id, "env_id": env_id, "split": split, "seed": seed,
                       "backend": backend, "episode": episode,
                       "tool_selection": tool_names(tools),
                       "tools_kwargs": tools_kwargs(tool_names(tools), identity),
                       "interaction_kwargs": interaction_kwargs(identity)},
        "env_id": env_id,
        "task_id": task_id,
        "split": split,
        "backend": backend,
        "seed": seed,
        "reward": float(reward),
        "rewards": [float(r) for r in rewards],
        "success": bool(success),
        "score": json.dumps(dict(score) if score is not None else None, ensure_ascii=False),
        "finish_reason": finish_reason,
        "steps": len(rewards),
        "agent": agent,
        "text_truncated": bool(text_truncated),
    }


def write_rows(rows: Iterable[Mapping[str, Any]], path: str | Path, fmt: ExportFormat | None = None) -> int:
    """Write rows as JSON Lines (one object a line) or Parquet (one row group, via pyarrow).

    Args:
        rows: the rows (of :func:`trajectory_row`).
        path: the file to write (its folder is created).
        fmt: ``jsonl`` or ``parquet``; default from the file's suffix (``.parquet``, else jsonl).

    Returns:
        The number of rows written.

    Raises:
        ConfigError: an unknown format.
        MissingDependencyError: Parquet without pyarrow (the message gives the pip line).
    """
    target = Path(path)
    chosen = fmt or format_of(target)
    if chosen not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {chosen!r}: use {' or '.join(EXPORT_FORMATS)}.")
    listed = [dict(r) for r in rows]
    target.parent.mkdir(parents=True, exist_ok=True)
    if chosen == "jsonl":
        with target.open("w", encoding="utf-8") as out:
            for row in listed:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return len(listed)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "export", PYARROW_PURPOSE) from exc
    table = pa.Table.from_pylist(listed) if listed else pa.table({name: pa.array([]) for name in TRAJECTORY_COLUMNS})
    pq.write_table(table, target)
    return len(listed)


def format_of(path: Path) -> ExportFormat:
    """``parquet`` for a ``.parquet`` file, else ``jsonl``."""
    return "parquet" if path.suffix.lower() == ".parquet" else "jsonl"


def text_was_cut(trace: EpisodeTrace) -> bool:
    """Whether any text of the trace (prompt, reply, thought, observation, model message) was cut at its cap."""
    texts = [trace.prompt]
    for step in trace.steps:
        texts += [step.raw_action, step.thought, step.observation]
        message = step.message or {}
        texts.append(str(message.get("content") or ""))
        texts += [str((call.get("function") or {}).get("arguments") or "")
                  for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    return any(_CUT_NOTE.search(t) for t in texts) or any(
        step.observation_chars > len(step.observation) for step in trace.steps)


def episode_messages(trace: EpisodeTrace, style: ChatStyle, *, protocol_tools: bool = False,
                     examples: bool = True, chat_head: list[dict[str, Any]] | None = None,
                     ) -> tuple[list[dict[str, Any]], int]:
    """The conversation of a traced episode, rebuilt with the agent's builder.

    Args:
        chat_head: the benchmark's opening turns the agent started from (``--protocol
            agentbench`` with a checkout: ``info["chat_head"]``), None for our own.

    Returns:
        ``(messages, prompt_length)``: the messages, and how many of them open the episode.
    """
    chat = ChatTranscript(style, examples=examples)
    chat.start({"domain": trace.domain, "grammar": trace.grammar, "tools": trace.tools,
                "protocol_tools": protocol_tools, "chat_head": chat_head})
    chat.add_observation(trace.prompt)
    prompt_length = len(chat.messages)
    for step in trace.steps:
        chat.add_reply(step.raw_action, message=step.message)
        chat.add_observation(step.observation)
    return list(chat.messages), prompt_length


def export_run(run_dir: str | Path, output: str | Path, fmt: ExportFormat | None = None,
               style: ChatStyle | None = None, agent_name: str = VERL_AGENT_NAME) -> ExportResult:
    """Write one row per finished episode of a run (:data:`TRAJECTORY_COLUMNS`).

    Episodes whose record is not ``done`` (agent, infrastructure or task errors) or has no
    trace are skipped and counted. The chat style: the run's ``openai:`` agent's mode
    (``tools`` under ``--tools`` or ``--protocol agentbench-fc``, else ``react``); for other
    agents, per episode, ``tools`` when a reply was a JSON tool call, else ``react``;
    ``style`` overrides both. Each row's ``reward_model`` holds its task's answer key, read from
    the run's task files (``--tasks``) or the bundled suite; a task found in neither (its file
    moved) gets none.

    Args:
        run_dir: the run folder (``results/<run>``).
        output: the file to write.
        fmt: ``jsonl`` or ``parquet``; default from the output's suffix.
        style: ``react`` or ``tools``, or None as above.
        agent_name: the verl agent loop named in every row (``agent_name``).

    Returns:
        What was written, with the number of rows whose trace text was cut.

    Raises:
        ConfigError: not a run folder, or an unknown format or style.
        MissingDependencyError: Parquet without pyarrow.
    """
    root = Path(run_dir)
    paths = RunPaths(root)
    if not paths.episodes.is_file():
        raise ConfigError(f"{root} is not a finished run: it has no episodes.jsonl. Give the folder "
                          "`agentunit-gym eval` wrote (results/<run>), after the run has finished episodes.")
    if style is not None and style not in ("react", "tools"):
        raise ConfigError(f"unknown chat style {style!r}: use react or tools.")
    config = _config_of(paths)
    agent_style = _agent_style(config)
    rows: list[dict[str, Any]] = []
    answers = _AnswerKeys(config)
    skipped: Counter[str] = Counter()
    truncated = 0
    for record in read_records(paths.episodes):
        if record.status != "done":
            skipped[record.status] += 1
            continue
        trace = load_trace(root, record)
        if trace is None:
            skipped["no trace"] += 1
            continue
        chosen = style or agent_style or _episode_style(trace)
        protocol_tools = _protocol_renames_tools(config, trace.domain)
        messages, prompt_length = episode_messages(trace, chosen, protocol_tools=protocol_tools,
                                                   chat_head=_chat_head(config, trace.domain))
        cut = text_was_cut(trace)
        truncated += cut
        score = trace.score
        rows.append(trajectory_row(
            messages, prompt_length=prompt_length, env_id=record.env_id, task_id=record.task_id,
            split=record.split or trace.split, backend=record.backend or trace.backend,
            answer=answers.get(record.env_id, record.task_id), agent_name=agent_name,
            seed=record.seed, rewards=[s.reward for s in trace.steps],
            reward=record.reward, success=record.success,
            score=score.model_dump() if score is not None else None, finish_reason=record.finish_reason,
            tools=_tools_shown(config, trace, protocol_tools), agent=record.agent, index=len(rows),
            episode=record.key, text_truncated=cut))
    written = write_rows(rows, output, fmt)
    return ExportResult(path=Path(output), rows=written, truncated=truncated, skipped=skipped)


# ------------------------------------------------------------------ private


def _config_of(paths: RunPaths) -> EvalConfig | None:
    if not paths.config.is_file():
        return None
    try:
        return EvalConfig.model_validate_json(paths.config.read_text(encoding="utf-8"))
    except ValueError:
        return None


def _agent_style(config: EvalConfig | None) -> ChatStyle | None:
    """The chat style of the run's ``openai:`` agent, as the CLI chose its mode; None for other agents."""
    if config is None or not config.agent.startswith("openai:"):
        return None
    mode = config.agent_settings.get("mode")
    if mode in ("react", "tools"):
        return "tools" if mode == "tools" else "react"
    return "tools" if config.protocol == "agentbench-fc" else "react"


def _episode_style(trace: EpisodeTrace) -> ChatStyle:
    jsonish = any((s.action or {}).get("form") == "json" or looks_like_json_call(s.raw_action) for s in trace.steps)
    return "tools" if jsonish else "react"


def _chat_head(config: EvalConfig | None, domain_name: str) -> list[dict[str, Any]] | None:
    """The opening turns a ``--protocol agentbench`` run with a checkout gave its agents, read
    again from that checkout; None for other runs.

    Raises:
        AgentBenchCheckoutError: the run's checkout is gone or laid out otherwise.
    """
    if config is None or config.protocol != "agentbench" or config.agentbench_root is None:
        return None
    if domain_name not in registry.domain_names():
        return None
    from agentunit_gym.wrappers.protocols import scripted_conversation

    conversation = scripted_conversation(domain_name, config.protocol, config.agentbench_root)
    return conversation.messages() if conversation is not None else None


def _protocol_renames_tools(config: EvalConfig | None, domain_name: str) -> bool:
    """Whether the run showed the agent another release's tool names (``RenameTools``), which drops the example."""
    if config is None or config.protocol == "agentunit" or domain_name not in registry.domain_names():
        return False
    preset = registry.get_domain(domain_name).protocols.get(config.protocol)
    return preset is not None and bool(preset.tools)


def _tools_shown(config: EvalConfig | None, trace: EpisodeTrace, protocol_tools: bool) -> list[Any]:
    if protocol_tools and config is not None:
        preset = registry.get_domain(trace.domain).protocols[config.protocol]
        return [json.loads(json.dumps(dict(alias.schema), default=dict)) for alias in preset.tools]
    return list(trace.tools)


class _AnswerKeys:
    """The answer keys of a run's tasks by env id and task id: the suite each env ran (the run's
    ``--tasks`` files of its domain, else its bundled suite), read once per env id."""

    def __init__(self, config: EvalConfig | None) -> None:
        self._paths = tuple(config.tasks) if config is not None else ()
        self._keys: dict[str, dict[str, AnswerKey | None]] = {}

    def get(self, env_id: str, task_id: str) -> AnswerKey | None:
        if env_id not in self._keys:
            self._keys[env_id] = {task.id: task.answer_key() for task in self._suite(env_id)}
        return self._keys[env_id].get(task_id)

    def _suite(self, env_id: str) -> list[TaskSpec]:
        domain = registry.domain_of_env(env_id)
        if domain is None:
            return []
        from agentunit_gym.eval.plan.routing import task_options

        try:
            given = task_options(env_id, self._paths).get("tasks")
        except AgentUnitError:  # the run's files moved or changed: their rows get no answer key
            return []
        return list(given) if given else domain.bundled_tasks()


__all__ = ["EXPORT_FORMATS", "TRAJECTORY_COLUMNS", "ExportFormat", "ExportResult", "episode_messages",
           "export_run", "format_of", "text_was_cut", "trajectory_row", "write_rows"]
