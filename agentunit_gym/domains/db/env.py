"""``AgentUnit/DB-v0``: AgentBench's SQL domain on a MySQL-compatible server or on SQLite.

Each episode gets its own database loaded with the task's tables. The agent runs SQL and
then answers (SELECT family) or commits its changes (INSERT / UPDATE / DELETE), in
AgentBench's ReAct grammar or as JSON tool calls.

Actions:

- ``Action: Operation`` followed by a ```` ```sql ```` block: the first block of the reply
  runs (tool ``execute_sql(query)``).
- ``Action: Answer`` followed by ``Final Answer: ["v1", "v2"]`` (tool
  ``submit_answer(answer)``, a list of strings or a string in the same syntax): commits.
- ``commit()`` (JSON only): "I am done modifying", for modification tasks.

Policy: ``submit_answer`` commits on every task; on a modification task its values are
ignored and the table hash decides (AgentBench agents end those with ``Final Answer: []``).
``commit`` on a SELECT-family task is an invalid action (``NOT_ALLOWED``): the question
needs an answer.

Observation of a statement: a result set is shown as a Python-literal list of row tuples,
like AgentBench's raw fetchall (``[('Lyon', 522000)]``; decimals unquoted, NULL as
``None``); a statement without a result set shows ``[]``; a SQL error shows ``Error: ...``
and a time-out ``Error: ... did not finish ...``. At most ``max_rows_shown`` rows are shown
(a line ``[N of M rows shown]`` follows when more were returned), and the whole text is cut
at ``observation_limit`` characters with a line ``[output truncated: ...]``.
"""

from __future__ import annotations

import json
import logging
import re
from decimal import Decimal
from functools import partial
from typing import Any, ClassVar

from agentunit_gym.backends.sql.base import EpisodeDatabase, QueryResult, SQLBackend
from agentunit_gym.core.actions import (
    Action,
    ActionError,
    ActionIssue,
    Param,
    ToolSpec,
    looks_like_json_call,
    split_json_call,
)
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.env import ActionFormat, AgentEnv, Execution, InvalidPolicy, TaskSource
from agentunit_gym.core.score import Score
from agentunit_gym.core.text import cap_text
from agentunit_gym.domains.db.domain import DOMAIN
from agentunit_gym.domains.db.scoring import answer_f1, answers_match, parse_answer_md5, parse_final_answer
from agentunit_gym.domains.db.task import DBTable, DBTask
from agentunit_gym.errors import ConfigError, EpisodeStateError, TaskFileError

log = logging.getLogger(__name__)

_ACTION = re.compile(r"Action\s*:\s*([A-Za-z_][\w-]*)")
_SQL_BLOCK = re.compile(r"```[ \t]*(?:sql|mysql|sqlite)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_FINAL = re.compile(r"Final\s+Answer\s*:", re.IGNORECASE)

_DIALECTS = {"mysql": "MySQL (MariaDB)", "sqlite": "SQLite"}


def render_cell(value: Any) -> str:
    """One cell as it appears in the Python-literal row list."""
    if isinstance(value, Decimal):
        return format(value, "f")  # numbers stay unquoted, whatever the engine's type
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value).decode("utf-8", errors="replace"))
    if isinstance(value, bool):
        return str(int(value))
    return repr(value)


def render_rows(rows: tuple[tuple[Any, ...], ...]) -> str:
    """Rows as a Python-literal list of tuples, ``[('a', 1), ('b', 2)]``."""
    parts = []
    for row in rows:
        cells = [render_cell(c) for c in row]
        parts.append("(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")")
    return "[" + ", ".join(parts) + "]"


class DBEnv(AgentEnv[DBTask]):
    """AgentBench's DB domain as a gymnasium env.

    Args:
        backend: ``"sqlite"`` or ``"mysql"``; None (the default) is ``sqlite`` on every host (the
            prompt names the SQL dialect, so the backend is part of the observation), or
            ``mysql`` when the call names a server (``dsn=``) or gives mysql options;
            ``"auto"`` is mysql when ``$AGENTUNIT_MYSQL_DSN`` is set or a Docker daemon answers,
            else sqlite (what ``agentunit-gym eval`` asks for). The choice is shown as
            ``env.backend_name`` and ``info["backend"]``.
        dsn: ``mysql://user:pass@host:port/`` of an existing server instead of a container.
        tasks: the suite: None for the bundled one, task files or folders, or DB task specs.
        max_steps: turn limit (default: the task's, else 15 as in AgentBench).
        invalid_action: ``"continue"`` or ``"terminate"`` (AgentBench's policy).
        render_mode: None or ``"ansi"``.
        split: ``"train"`` or ``"test"``: the suite restricted to that split (docs/tasks.md, "Splits").
        action_format: ``"text"`` (default) or ``"tools"``: tool calls only (see ``AgentEnv``).
        statement_timeout: seconds one agent statement may run before it is cancelled.
        max_rows_shown: rows of a result set shown to the agent.
        observation_limit: characters of an observation shown to the agent.
        sql_backend: an already open backend to use; the env does not close it.
        **backend_options: passed to the backend factory (image, server options ...).

    Raises:
        ConfigError: an unknown option value.
        BackendUnavailableError: the asked-for backend cannot be started or reached.
    """

    DOMAIN = DOMAIN
    grammar: ClassVar[str] = (
        "Each turn, think briefly, then write exactly one action in one of these two forms "
        "(the words in capitals stand for your own text).\n"
        "To run SQL (only the first ```sql block of your reply runs, one statement):\n"
        "Action: Operation\n```sql\nYOUR SQL STATEMENT\n```\n"
        "The result comes back as a Python-style list of row tuples.\n"
        "To give your final answer (this ends the task):\n"
        "Action: Answer\nFinal Answer: YOUR ANSWER VALUES AS A JSON LIST OF STRINGS\n"
        "List every value the question asks for, exactly. If the task changes the database, "
        "make the change first and then finish with Final Answer: []."
    )
    """How to reply, stated once: in the first observation (``info["grammar"]``)."""
    tools: ClassVar[tuple[ToolSpec, ...]] = (
        ToolSpec("execute_sql", "Run one SQL statement on the task's database and see its result.",
                 (Param("query", "string", "the SQL statement"),)),
        ToolSpec("submit_answer",
                 "Give the final answer and end the episode. For a task that modifies the database, "
                 "make the change first; the answer may then be empty.",
                 (Param("answer", "array", "the answer values, as strings"),), commits=True),
        ToolSpec("commit", "End a task that modifies the database: you are done modifying.", (), commits=True),
    )

    def __init__(
        self,
        *,
        backend: str | None = None,
        dsn: str | None = None,
        tasks: TaskSource = None,
        max_steps: int | None = None,
        invalid_action: InvalidPolicy = "continue",
        render_mode: str | None = None,
        split: str | None = None,
        action_format: ActionFormat = "text",
        statement_timeout: float = 10.0,
        max_rows_shown: int = 100,
        observation_limit: int = 4000,
        sql_backend: SQLBackend | None = None,
        **backend_options: Any,
    ) -> None:
        self._db: EpisodeDatabase | None = None
        if statement_timeout <= 0:
            raise ConfigError(f"statement_timeout must be positive, got {statement_timeout}.")
        if max_rows_shown < 1 or observation_limit < 100:
            raise ConfigError(
                "max_rows_shown must be >= 1 and observation_limit >= 100, "
                f"got {max_rows_shown} and {observation_limit}."
            )
        if backend is None:  # the same on every host: never a daemon's or the environment's choice
            backend = "mysql" if dsn is not None or backend_options else DOMAIN.embedded_backend.name
        DOMAIN.check_backend(backend)  # before the tasks load: a typo fails first
        super().__init__(tasks=tasks, max_steps=max_steps, invalid_action=invalid_action, render_mode=render_mode,
                         split=split, action_format=action_format)
        self.statement_timeout = float(statement_timeout)
        self.max_rows_shown = int(max_rows_shown)
        self.observation_limit = int(observation_limit)
        self._expected_hashes: dict[tuple[str, tuple[str, ...], tuple[DBTable, ...]], str] = {}
        self._sql: BackendHandle[SQLBackend]
        if sql_backend is not None:
            self._sql = BackendHandle.borrowed(sql_backend, refusal=(
                "it runs on a SQL backend object it was given (sql_backend=...); make it with backend='sqlite' "
                "or 'mysql' (and dsn=) so a copy can open its own."))
        else:
            # The domain's factory (imported on first use: it pulls in pymysql and docker only then).
            opened: SQLBackend = DOMAIN.open_backend(backend, dsn=dsn, **backend_options)
            # A copy in another process reopens the resolved kind, not "auto".
            self._sql = BackendHandle.owned(opened, reopen=partial(_open_sql, opened.kind, dsn, dict(backend_options)))
        log.debug("DB env on the %s backend (asked for %r)", self._sql.kind, backend)

    # ------------------------------------------------------------------ hooks

    @property
    def backend_name(self) -> str:
        return self._sql.kind

    @property
    def sql_backend(self) -> SQLBackend:
        """The SQL backend this env runs on."""
        return self._sql.get()

    def parse_action(self, text: str) -> Action | ActionError:
        """Like the base, but a JSON ``submit_answer`` may give its answer as one string
        (``"[\\"a\\", \\"b\\"]"`` or ``"42"``), parsed like a ``Final Answer:``; and ``commit``
        is refused on a task that asks a question."""
        if isinstance(text, str) and looks_like_json_call(text):
            text = _coerce_answer_argument(text)
        parsed = super().parse_action(text)
        return parsed if isinstance(parsed, ActionError) else self._validate(parsed)

    def _start_episode(self, task: DBTask) -> str:
        self._db = self._sql.get().open_episode(task.table_data(), database=task.database)
        dialect = _DIALECTS.get(self.backend_name, self.backend_name)
        description = f"\n{task.description}" if task.description else ""
        return (
            f"You are working with a {dialect} database. Use {dialect} SQL to answer the question below, "
            f"or to make the change it asks for.\n\n{self.grammar}\n\nQuestion: {task.instruction}{description}"
        )

    def _parse_react(self, text: str) -> Action | ActionError:
        match = _ACTION.search(text)
        if match is None:
            return ActionError(
                ActionIssue.NO_CALL, "no 'Action:' line found.",
                hint="Write 'Action: Operation' with a ```sql block, or 'Action: Answer' with 'Final Answer: [...]'.",
            )
        thought = text[: match.start()].strip()
        keyword = match.group(1)
        rest = text[match.end():]
        if keyword.lower() == "operation":
            block = _SQL_BLOCK.search(rest)
            if block is None or not block.group(1).strip():
                return ActionError(
                    ActionIssue.MALFORMED, "'Action: Operation' must be followed by a ```sql block holding the SQL.",
                    tool="execute_sql",
                )
            return Action("execute_sql", {"query": block.group(1).strip()}, thought=thought)
        if keyword.lower() == "answer":
            final = _FINAL.search(rest)
            if final is None:
                return ActionError(
                    ActionIssue.MALFORMED, "'Action: Answer' must be followed by 'Final Answer: [...]'.",
                    tool="submit_answer",
                )
            return Action("submit_answer", {"answer": parse_final_answer(_answer_text(rest[final.end():]))},
                          thought=thought)
        return ActionError(
            ActionIssue.UNKNOWN_TOOL, f"unknown action {keyword!r}; the actions are 'Operation' and 'Answer'.",
            hint="Write 'Action: Operation' or 'Action: Answer'.", tool=keyword,
        )

    def _validate(self, action: Action) -> Action | ActionError:
        task = self.task
        if action.tool == "commit" and task is not None and not task.is_modification:
            return ActionError(
                ActionIssue.NOT_ALLOWED,
                "commit ends a task that modifies the database; this task asks a question.",
                hint="Give the answer with submit_answer." if self.tool_calls_only else
                     "Give the answer with submit_answer (or 'Action: Answer' / 'Final Answer: [...]').",
                tool="commit",
            )
        return action

    def _execute(self, action: Action) -> Execution:
        result = self._episode_db().execute(
            action.arguments["query"], timeout=self.statement_timeout, max_rows=self.max_rows_shown
        )
        return self._observe(result)

    def _score(self, action: Action | None) -> Score:
        task = self.task
        if task is None:
            raise EpisodeStateError("no episode to score.")
        base: dict[str, Any] = {"type": task.type, "category": task.category, "family": task.family}
        if not task.is_modification:
            gold = list(task.answer or ())
            if action is None or action.tool != "submit_answer":
                return Score.failed("no answer was submitted", **base, answer_match=False,
                                    exact_match=False, hash_match=None, success=False, answer_f1=0.0)
            given = list(action.arguments.get("answer", []))
            ok = answers_match(given, gold)
            components = {**base, "answer_match": ok, "exact_match": ok, "hash_match": None, "success": ok,
                          "answer_f1": answer_f1(given, gold), "answer": json.dumps(given, ensure_ascii=False)}
            detail = "answer matches" if ok else f"answer {given!r} does not match the gold answer"
            return Score(reward=float(ok), success=ok, components=components, detail=detail)
        table = task.graded_table
        actual = self._episode_db().table_hash(table.name, [c.name for c in table.columns])
        expected = self._expected_hash(task)
        ok = actual == expected
        components = {**base, "answer_match": None, "hash_match": ok, "exact_match": ok, "success": ok,
                      "expected_hash": expected, "actual_hash": actual}
        detail = "table matches the expected state" if ok else f"table {table.name!r} differs from the expected state"
        return Score(reward=float(ok), success=ok, components=components, detail=detail)

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "execute_sql":
            return f"Action: Operation\n```sql\n{arguments['query']}\n```"
        if tool == "submit_answer":
            return "Action: Answer\nFinal Answer: " + json.dumps(list(arguments.get("answer", [])), ensure_ascii=False)
        if tool == "commit":
            # The grammar has no commit: AgentBench agents end a modification with an empty answer.
            return "Action: Answer\nFinal Answer: []"
        raise ConfigError(f"the DB env has no tool {tool!r}.")

    def admin_run(self, command: str) -> Execution:
        """Run SQL with full rights on the episode database (trap planting, state checks).

        Args:
            command: one SQL statement.

        Returns:
            The rendered result (same format as the agent's), with details.

        Raises:
            EpisodeStateError: no episode has been started.
        """
        result = self._episode_db().admin_query(command, timeout=max(30.0, self.statement_timeout))
        return self._observe(result, cap=False)

    def _end_episode(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # ---------------------------------------------------------------- private

    _live_state = ("_db",)

    def _episode_db(self) -> EpisodeDatabase:
        if self._db is None:
            raise EpisodeStateError("no episode database: call reset() first.")
        return self._db

    def _observe(self, result: QueryResult, *, cap: bool = True) -> Execution:
        details: dict[str, Any] = {
            "rowcount": result.rowcount,
            "columns": list(result.columns),
            "rows_shown": len(result.rows),
            "truncated": result.truncated,
            "timed_out": result.timed_out,
            "error": result.error,
            "duration_s": result.duration_s,
        }
        if result.timed_out:
            text = f"Error: the statement did not finish within {self.statement_timeout:g} s and was cancelled."
        elif result.error is not None:
            text = f"Error: {result.error}"
        else:
            text = render_rows(result.rows) if result.columns else "[]"
            if result.truncated:
                text += f"\n[{len(result.rows)} of {result.rowcount} rows shown]"
        details["observation_chars"] = len(text)
        if cap and len(text) > self.observation_limit:
            details["truncated"] = True
            text = cap_text(text, self.observation_limit, "\n[output truncated: {shown} of {total} characters shown]")
        return Execution(text, details, error=not result.ok)

    def _expected_hash(self, task: DBTask) -> str:
        if task.answer_md5 is not None and self.backend_name == "mysql":
            return parse_answer_md5(task.answer_md5)
        # Keyed by content too: an ad-hoc task (reset(options={"task": ...})) may reuse an id.
        key = (task.id, task.reference_sql, task.tables)
        cached = self._expected_hashes.get(key)
        if cached is not None:
            return cached
        # A pristine copy on the same engine, so dialect details (number formatting,
        # collation) affect both sides of the comparison alike.
        pristine = self._sql.get().open_episode(task.table_data())
        try:
            for statement in task.reference_sql:
                result = pristine.admin_query(statement)
                if not result.ok:
                    raise TaskFileError(
                        task.source or task.id,
                        f"reference SQL failed on the {self.backend_name} backend: {result.error or 'timed out'}. "
                        "Fix reference_sql, or limit the task to the backends it runs on (backends, backend_note).",
                        task_id=task.id, field="reference_sql",
                    )
            table = task.graded_table
            digest = pristine.table_hash(table.name, [c.name for c in table.columns])
        finally:
            pristine.close()
        self._expected_hashes[key] = digest
        return digest


def _open_sql(kind: str, dsn: str | None, options: dict[str, Any]) -> SQLBackend:
    """The backend a pickled or copied env opens in its process (a module function: it pickles)."""
    backend: SQLBackend = DOMAIN.open_backend(kind, dsn=dsn, **options)
    return backend


def _answer_text(rest: str) -> str:
    """The answer after ``Final Answer:``: a list up to its matching ``]`` (it may span lines;
    brackets inside quotes do not count), else the first line."""
    stripped = rest.strip()
    if not stripped.startswith("["):
        return stripped.splitlines()[0] if stripped else ""
    depth, quote, escaped = 0, "", False
    for index, char in enumerate(stripped):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
            if depth == 0:
                return stripped[: index + 1]
    return stripped  # unbalanced: let the parser make what it can of all of it


def _coerce_answer_argument(text: str) -> str:
    call = split_json_call(text)
    if isinstance(call, ActionError) or call[0] != "submit_answer" or "answer" not in call[1]:
        return text  # the base reports what is wrong with it, if anything
    arguments = call[1]
    answer = arguments["answer"]
    if isinstance(answer, str):
        answer = parse_final_answer(answer)
    elif isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = [str(answer)]
    elif isinstance(answer, list) and all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in answer):
        answer = [str(a) for a in answer]
    else:
        return text  # the base reports the wrong type
    return json.dumps({"name": "submit_answer", "arguments": {**arguments, "answer": answer}}, ensure_ascii=False)
