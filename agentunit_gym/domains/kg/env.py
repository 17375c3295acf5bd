"""``AgentUnit/KG-v0``: AgentBench's knowledge-graph domain on an embedded store or a SPARQL endpoint.

The agent answers a question by calling seven tools that build a query step by step; each
call that makes a variable names it ``#k``; ``Final Answer: #k`` commits. Tools, argument
handling, observations and error texts follow AgentBench's knowledgegraph task (see
:mod:`agentunit_gym.domains.kg.tools`).

Actions:

- ReAct text: ``Thought: ...`` then ``Action: get_neighbors(#0, location.country.capital)``
  (the first line starting with ``Action`` is read, the first tool call on it runs); or
  ``Final Answer: #3`` (commits). Text after ``Observation:`` is ignored, and ``\\_`` reads as
  ``_``, as in AgentBench.
- JSON tool calls: ``{"name": "get_neighbors", "arguments": {"variable": "#0", "relation": "..."}}``;
  ``final_answer(variable)`` commits.

Score (``info["score"]`` at the end, reward = F1): ``f1``, ``precision``, ``recall`` and
``exact_match`` between the committed variable's answer set and the gold set, and
``executability`` (1 when the committed program runs and returns at least one result,
AgentBench's definition). Not committing scores 0 on all of them.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from agentunit_gym.backends.sparql.base import SPARQLBackend
from agentunit_gym.core.actions import Action, ActionError, ActionIssue, Param, ToolSpec
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.env import ActionFormat, AgentEnv, Execution, InvalidPolicy, TaskSource
from agentunit_gym.core.score import Score
from agentunit_gym.domains.kg.domain import DOMAIN
from agentunit_gym.domains.kg.prompt import GRAMMAR, task_prompt
from agentunit_gym.domains.kg.scoring import answer_scores
from agentunit_gym.domains.kg.task import TOOL_PARAMS, KGTask
from agentunit_gym.domains.kg.tools import KGSession, ToolFailure, Vocabulary, cannot_execute
from agentunit_gym.errors import (
    BackendError,
    BackendTimeoutError,
    ConfigError,
    EndpointRequiredError,
    EpisodeStateError,
)

log = logging.getLogger(__name__)

_FINAL = re.compile(r"(?:Find|Final) Answer: #(\d+)")
_ACTION_LINE = re.compile(r"Action.*?:")
_FUNCTION = re.compile(r"\b(\w{1,64})\(")
r"""AgentBench's ``(\w+)\(``, anchored at a word start and with bounded names so a long word
cannot make the search quadratic (a 1 MB argument took minutes)."""

ENDPOINT_ENV = "AGENTUNIT_KG_ENDPOINT"
"""Environment variable read when no ``endpoint`` is given (lets ``agentunit-gym eval`` reach a Freebase server)."""

NO_ACTION_TEXT = "No executable function found! Need to recheck the action."
NOT_EXECUTED_TEXT = "Function is not executed!"
INVALID_VARIABLE_TEXT = "Invalid variable id! Need to recheck the action."


@dataclass(frozen=True)
class KGActionError(ActionError):
    """An invalid reply whose feedback is AgentBench's exact text."""

    text: str = ""

    def feedback(self) -> str:
        return self.text


def _syntax_error_text(function: str) -> str:
    return (f"I may make a syntax error when calling {function} (e.g., unmatched parenthesis). "
            "I need to fix it and reuse the tool")


def _variable_param(name: str = "variable") -> Param:
    return Param(name, "string", "a variable id such as #0, an entity id, or an entity's name from the question")


def _freebase_vocabulary(ontology: str | Path | bool | None, tasks: Sequence[KGTask]) -> Vocabulary:
    """The Freebase vocabulary: AgentBench's ontology when given (or found above the tasks'
    files), else the store's own."""
    from agentunit_gym.domains.kg.ontology import ONTOLOGY_DIR, agentbench_vocabulary
    from agentunit_gym.tasks.agentbench_checkout import find_checkout

    if ontology is False:
        return Vocabulary.from_store()
    if ontology is not None and ontology is not True:
        return agentbench_vocabulary(ontology)
    for task in tasks:
        root = find_checkout(task.source.split("#", 1)[0]) if task.source else None
        if root is not None and (root / ONTOLOGY_DIR / "vocab.json").is_file():
            return agentbench_vocabulary(root)
    if ontology is True:
        raise ConfigError("ontology=True: none of the tasks' files lies in an AgentBench checkout with the KG "
                          "ontology; give the checkout's path instead.")
    return Vocabulary.from_store()


class KGEnv(AgentEnv[KGTask]):
    """AgentBench's knowledge-graph domain as a gymnasium env.

    Args:
        backend: ``"auto"`` (``sparql`` when ``endpoint`` is given, else ``embedded``),
            ``"embedded"`` (pyoxigraph in process, the bundled graph) or ``"sparql"``.
        endpoint: a SPARQL 1.1 query URL for ``sparql``: any store holding the bundled
            graph, or a Freebase server for AgentBench's own items. ``sparql`` without an
            endpoint starts a ``kg`` container (Docker) and removes it on ``close()``. None
            reads ``$AGENTUNIT_KG_ENDPOINT``.
        graph: ``"bundled"`` or ``"freebase"``: which tasks run, and whether relations and
            attributes come from the bundled schema or from the store. None: ``freebase``
            when every task is (AgentBench's items), else ``bundled``.
        tasks: the suite: None for the bundled one, task files (ours or AgentBench's
            ``dev.json``/``std.json``), or KG task specs.
        max_steps: turn limit (default: the task's, else 15 as in AgentBench).
        invalid_action: ``"continue"`` or ``"terminate"``.
        render_mode: None or ``"ansi"``.
        split: ``"train"`` or ``"test"``: the suite restricted to that split (docs/tasks.md, "Splits").
        action_format: ``"text"`` (default) or ``"tools"``: tool calls only (see ``AgentEnv``).
        query_timeout: seconds one SPARQL query may run.
        max_results: the most results one lookup may return; a step past it fails (an
            observation), so a set can never grow without bound.
        sparql_backend: an already open backend to use; the env does not close it.
        ontology: on the Freebase graph, AgentBench's ontology vocabulary to filter the
            relations and attributes the store lists (as AgentBench's KG task does): an
            AgentBench checkout or its ``ontology`` folder; None finds the checkout the tasks'
            files lie in (none: the store's own); False: always the store's own. Ignored on
            the bundled graph (:mod:`agentunit_gym.domains.kg.ontology`).

    Raises:
        ConfigError: an unknown option value.
        BackendUnavailableError: the store cannot be opened or reached.
    """

    DOMAIN = DOMAIN
    grammar: ClassVar[str] = GRAMMAR
    tools: ClassVar[tuple[ToolSpec, ...]] = (
        ToolSpec("get_relations", "List the relations leaving an entity or a variable.", (_variable_param(),)),
        ToolSpec("get_neighbors", "Make a new variable: the entities reached from a variable through a relation "
                 "that get_relations listed for it.",
                 (_variable_param(), Param("relation", "string", "a relation listed by get_relations"))),
        ToolSpec("intersection", "Make a new variable: the entities in both variables (of the same type).",
                 (_variable_param("variable1"), _variable_param("variable2"))),
        ToolSpec("get_attributes", "List the numerical attributes of a variable.", (_variable_param(),)),
        ToolSpec("argmax", "Make a new variable: the entities of a variable with the largest value of an attribute.",
                 (_variable_param(), Param("attribute", "string", "an attribute listed by get_attributes"))),
        ToolSpec("argmin", "Make a new variable: the entities of a variable with the smallest value of an attribute.",
                 (_variable_param(), Param("attribute", "string", "an attribute listed by get_attributes"))),
        ToolSpec("count", "Make a new variable: the number of entities in a variable.", (_variable_param(),)),
        ToolSpec("final_answer", "Commit a variable as the answer and end the episode.",
                 (Param("variable", "string", "the variable holding the answer, e.g. #3"),), commits=True),
    )

    def __init__(
        self,
        *,
        backend: str = "auto",
        endpoint: str | None = None,
        graph: str | None = None,
        tasks: TaskSource = None,
        max_steps: int | None = None,
        invalid_action: InvalidPolicy = "continue",
        render_mode: str | None = None,
        split: str | None = None,
        action_format: ActionFormat = "text",
        query_timeout: float = 10.0,
        max_results: int = 100_000,
        sparql_backend: SPARQLBackend | None = None,
        ontology: str | Path | bool | None = None,
    ) -> None:
        self._session: KGSession | None = None
        if graph not in (None, "bundled", "freebase"):
            raise ConfigError(f"graph must be 'bundled' or 'freebase', got {graph!r}.")
        if query_timeout <= 0 or max_results < 1:
            raise ConfigError(f"query_timeout must be > 0 and max_results >= 1, got {query_timeout}, {max_results}.")
        super().__init__(tasks=tasks, max_steps=max_steps, invalid_action=invalid_action, render_mode=render_mode,
                         split=split, action_format=action_format)
        if graph is None:
            graph = "freebase" if self.suite and all(t.graph == "freebase" for t in self.suite) else "bundled"
        self.graph = graph
        self.query_timeout = float(query_timeout)
        self.max_results = int(max_results)
        self.vocabulary = Vocabulary.bundled() if graph == "bundled" else _freebase_vocabulary(
            ontology, self.suite)
        self._store: BackendHandle[SPARQLBackend]
        if sparql_backend is not None:
            self._store = BackendHandle.borrowed(sparql_backend, refusal=(
                "it queries a SPARQL backend object it was given (sparql_backend=...); make it with "
                "backend='embedded' or 'sparql' (and endpoint=) so a copy can open its own."))
        else:
            if not endpoint and (graph == "freebase" or backend == "sparql"):
                # The variable names the server where one is needed or asked for; the bundled
                # graph without backend= stays embedded on every host (one observation per seed).
                endpoint = os.environ.get(ENDPOINT_ENV) or None
            if graph == "freebase" and not endpoint:
                # Without one, the bundled geography graph would answer Freebase questions: every
                # episode would run, find nothing, and score 0 as if the agent had failed.
                raise EndpointRequiredError(
                    "these KG tasks are about Freebase (AgentBench's knowledge-graph items), and no Freebase "
                    "SPARQL endpoint was given. Give one that holds Freebase, as AgentBench's setup runs it: "
                    "`agentunit-gym eval ... --env-option KG-v0:endpoint=http://HOST:PORT/sparql`, endpoint=... "
                    f"to the env, or {ENDPOINT_ENV}=http://HOST:PORT/sparql; the bundled graph cannot answer them.")
            opened = _open_store(backend, endpoint)
            # A copy in another process reopens the resolved kind, not "auto".
            self._store = BackendHandle.owned(opened, reopen=partial(_open_store, opened.kind, endpoint))
        log.debug("KG env on the %s backend (asked for %r)", self._store.kind, backend)

    # ------------------------------------------------------------------ hooks

    @property
    def backend_name(self) -> str:
        return self._store.kind

    @property
    def sparql_backend(self) -> SPARQLBackend:
        """The store this env queries."""
        return self._store.get()

    @property
    def tasks(self) -> list[KGTask]:
        """The tasks about this env's graph that run on its backend."""
        return [t for t in super().tasks if t.graph == self.graph]

    @property
    def session(self) -> KGSession:
        """The running episode's variables and listings."""
        if self._session is None:
            raise EpisodeStateError("no KG episode is running: call reset() first.")
        return self._session

    def parse_action(self, text: str) -> Action | ActionError:
        """Like the base, and ``final_answer`` must name a variable the episode has made."""
        parsed = super().parse_action(text)
        return parsed if isinstance(parsed, ActionError) else self._validate(parsed)

    def _start_episode(self, task: KGTask) -> str:
        if task.graph != self.graph:
            raise ConfigError(f"task {task.id!r} is about the {task.graph!r} graph; this env serves {self.graph!r}.")
        self._session = KGSession(self._store.get(), task.entities, self.vocabulary,
                                  timeout=self.query_timeout, max_results=self.max_results)
        return task_prompt(task.instruction, list(task.entities), self.max_steps)

    def _parse_react(self, text: str) -> Action | ActionError:
        text = text.split("Observation:")[0].replace("\\_", "_")
        final = _FINAL.findall(text)
        if final:
            thought = text[: text.find("Answer:")].rsplit("\n", 1)[0].strip() if "\n" in text else ""
            return Action("final_answer", {"variable": f"#{final[0]}"}, thought=thought)
        lines = text.split("\n")
        for index, line in enumerate(lines):
            if not _ACTION_LINE.match(line):
                continue
            thought = "\n".join(lines[:index]).strip()
            functions = _FUNCTION.findall(line)
            if not functions:
                return KGActionError(ActionIssue.MALFORMED, "the Action line calls no function.",
                                     text=NOT_EXECUTED_TEXT)
            error: KGActionError | None = None
            for function in functions:
                inside = re.findall(rf"{re.escape(function)}\((.+?)\)", line)
                if function not in TOOL_PARAMS or not inside:
                    error = KGActionError(ActionIssue.UNKNOWN_TOOL if function not in TOOL_PARAMS
                                          else ActionIssue.MALFORMED,
                                          f"cannot call {function!r}.", tool=function,
                                          text=_syntax_error_text(function))
                    continue
                arguments = re.split(r"\s*,\s*", inside[0])
                params = TOOL_PARAMS[function]
                if len(arguments) != len(params):
                    return KGActionError(ActionIssue.INVALID_PARAMETER,
                                         f"{function} takes {len(params)} argument(s), got {len(arguments)}.",
                                         tool=function, text=cannot_execute(function, arguments))
                return Action(function, dict(zip(params, arguments, strict=True)), thought=thought)
            return error or KGActionError(ActionIssue.MALFORMED, "the Action line calls no function.",
                                          text=NOT_EXECUTED_TEXT)
        return KGActionError(ActionIssue.NO_CALL, "no 'Action:' line and no 'Final Answer: #k'.", text=NO_ACTION_TEXT)

    def _validate(self, action: Action) -> Action | ActionError:
        if action.tool == "final_answer":
            reference = str(action.arguments.get("variable", "")).strip()
            if reference.isdigit():
                reference = f"#{reference}"
            if self._session is None or self._session.variable_at(reference) is None:
                return KGActionError(ActionIssue.INVALID_PARAMETER, f"no variable {reference[:40]!r} yet.",
                                     tool="final_answer", text=INVALID_VARIABLE_TEXT)
            return Action("final_answer", {"variable": reference}, form=action.form, thought=action.thought)
        return action

    def _execute(self, action: Action) -> Execution:
        params = TOOL_PARAMS[action.tool]
        arguments = [str(action.arguments[p]).strip() for p in params]
        details: dict[str, Any] = {"tool": action.tool}
        try:
            outcome = self.session.call(action.tool, arguments)
        except ToolFailure as failure:
            details["issue"] = failure.issue
            details["timed_out"] = failure.issue == "query_timeout"
            if failure.detail:
                details["detail"] = failure.detail[:300]
            return Execution(failure.text, details, error=True)
        details.update(outcome.details)
        if outcome.variable is None:
            details["listed"] = len(outcome.listed)
        return Execution(outcome.observation, details)

    def _score(self, action: Action | None) -> Score:
        task = self.task
        if task is None:
            raise EpisodeStateError("no episode to score.")
        gold = list(task.answer)
        if action is None or action.tool != "final_answer" or self._session is None:
            return Score.failed("no answer was committed", f1=0.0, precision=0.0, recall=0.0,
                                exact_match=False, executability=0, n_gold=len(gold), n_predicted=0)
        variable = self._session.variable_at(str(action.arguments["variable"]))
        if variable is None:  # _validate refuses this; kept for callers that skip it
            return Score.failed("the committed variable does not exist", f1=0.0, precision=0.0, recall=0.0,
                                exact_match=False, executability=0, n_gold=len(gold), n_predicted=0)
        error = ""
        try:
            predicted = self._session.answer(variable)
        except (BackendTimeoutError, BackendError) as exc:
            predicted, error = [], str(exc)
        scores = answer_scores(predicted, gold)
        components: dict[str, Any] = {
            **scores,
            "executability": int(bool(predicted)),
            "n_gold": len(gold),
            "n_predicted": len(predicted),
            "program": variable.program.s_expression(),
            "answer": json.dumps(predicted[:50], ensure_ascii=False),
        }
        if error:
            components["execution_error"] = error[:300]
        ok = bool(scores["exact_match"])
        failed = f" (program failed: {error[:120]})" if error else ""
        detail = "answer set matches" if ok else f"F1 {scores['f1']:.2f} against the gold set{failed}"
        return Score(reward=float(scores["f1"]), success=ok, components=components, detail=detail)

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "final_answer":
            reference = str(arguments["variable"])
            return f"Final Answer: {reference if reference.startswith('#') else '#' + reference}"
        if tool not in TOOL_PARAMS:
            raise ConfigError(f"the KG env has no tool {tool!r}.")
        values = ", ".join(str(arguments[p]) for p in TOOL_PARAMS[tool])
        return f"Action: {tool}({values})"

    def _end_episode(self) -> None:
        self._session = None

    # ---------------------------------------------------------------- private

    _live_state = ("_session",)


def _open_store(kind: str, endpoint: str | None) -> SPARQLBackend:
    """The store of an env, in this process (a module function, so a pickled env can reopen it)."""
    from agentunit_gym.domains.kg.store import bundled_store

    store: SPARQLBackend = DOMAIN.open_backend(kind, endpoint=endpoint, store=bundled_store)
    return store
