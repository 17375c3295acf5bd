"""The judge's model calls: :class:`Judge` (the critic, the quantifier and the verifier over one
model client), asking for JSON by schema where the server takes ``response_format``."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from agentunit_gym.core import registry
from agentunit_gym.core.trace import EpisodeTrace, Usage
from agentunit_gym.errors import AgentUnitError
from agentunit_gym.eval.agents.model_client import ModelAPIError, ModelClient
from agentunit_gym.eval.judge.criteria import CriteriaSet, Criterion, Dropped
from agentunit_gym.eval.judge.files import JudgeConfig
from agentunit_gym.eval.judge.prompts import (
    CRITERIA_SCHEMA,
    JudgeAnswerError,
    Judgement,
    critic_messages,
    judgement_schema,
    parse_criteria,
    parse_judgement,
    quantifier_messages,
)


def add_usage(total: Usage, usage: Usage) -> Usage:
    def plus(a: float | None, b: float | None) -> float | None:
        return b if a is None else a if b is None else a + b
    return Usage(tokens_in=plus(total.tokens_in, usage.tokens_in),  # type: ignore[arg-type]
                 tokens_out=plus(total.tokens_out, usage.tokens_out),  # type: ignore[arg-type]
                 cost=plus(total.cost, usage.cost), latency_s=plus(total.latency_s, usage.latency_s))


_RESPONSE_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|structured output|guided_json",
                                    re.IGNORECASE)
"""Words of a 400 or 422 that refuses the ``response_format`` parameter (OpenAI: "Invalid parameter:
'response_format' of type 'json_schema' is not supported with this model"; others: "Unrecognized
request argument supplied: response_format"; llama-cpp-python's server validates the field and
answers a 500 with the validation error naming ``response_format``)."""

REPLY_FORMATS: tuple[str, ...] = ("json_schema", "json_object", "plain")
"""How the judge asks for its answers, tried in this order until the server takes one:
OpenAI's ``{"type": "json_schema", "json_schema": {"name", "schema"}}`` (OpenAI, vLLM, SGLang,
llama.cpp's own server); ``{"type": "json_object", "schema": ...}``, the form llama-cpp-python's
server turns into a grammar; no ``response_format`` at all (the prompt alone asks for JSON)."""


def rejects_response_format(exc: ModelAPIError) -> bool:
    """Whether a refusal is about ``response_format`` (a 400 or 422 naming it, or the 500 with
    which llama-cpp-python's server reports a request field that does not validate): the server
    does not take this form, and the judge asks again in the next of :data:`REPLY_FORMATS`."""
    return exc.status in (400, 422, 500) and bool(_RESPONSE_FORMAT_WORDS.search(str(exc)))


def response_format(reply_format: str, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field of one of :data:`REPLY_FORMATS` (None for ``plain``)."""
    if reply_format == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if reply_format == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


class Judge:
    """The critic, the quantifier and the verifier over one model client.

    Every call asks for JSON by schema, in the first of :data:`REPLY_FORMATS` the server takes:
    a call the server refuses for its ``response_format`` (:func:`rejects_response_format`) is
    sent again in the next form, and every later call of this judge starts there
    (:attr:`reply_format`). The reply is read by the same strict parser whatever the form.
    """

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.client = ModelClient(config.model)
        self.usage = Usage()
        self._format = 0  # index into REPLY_FORMATS: the first form not refused so far
        self._answered = False
        # Every judge call (critic, verifier, quantifier) takes a slot: at most ``concurrency`` in flight.
        self._slots = asyncio.Semaphore(config.concurrency)

    @property
    def reply_format(self) -> str:
        """The form the server took (one of :data:`REPLY_FORMATS`), ``unknown`` before any answer."""
        return REPLY_FORMATS[self._format] if self._answered else "unknown"

    async def ask(self, messages: list[dict[str, Any]], schema: tuple[str, dict[str, Any]] | None = None,
                  ) -> tuple[str, Usage]:
        """One judge call; the reply's text and the call's usage.

        Args:
            messages: the conversation.
            schema: ``(name, JSON schema)`` of the answer, asked for as ``response_format``.

        Raises:
            JudgeAnswerError: the model refused (``kind="refused"``; its ``usage`` set).
            ModelAPIError, AgentContextLimitError: the endpoint failed.
        """
        async with self._slots:
            completion = await self._complete(messages, schema)
        self.usage = add_usage(self.usage, completion.usage)
        if completion.refusal or completion.finish_reason == "content_filter":
            raise JudgeAnswerError(f"the judge refused: {(completion.refusal or 'content filter')[:200]}", "refused",
                                   usage=completion.usage)
        return completion.text, completion.usage

    async def _complete(self, messages: list[dict[str, Any]], schema: tuple[str, dict[str, Any]] | None) -> Any:
        if schema is None:
            return await self.client.complete(messages)
        while True:
            index = self._format
            field = response_format(REPLY_FORMATS[index], *schema)
            try:
                completion = (await self.client.complete(messages, response_format=field) if field is not None
                              else await self.client.complete(messages))
            except ModelAPIError as exc:
                if field is None or not rejects_response_format(exc):
                    raise
                self._format = max(self._format, index + 1)  # concurrent calls may have moved on already
                continue
            self._answered = True
            return completion

    async def quantify(self, trace: EpisodeTrace, criteria: tuple[Criterion, ...]) -> Judgement:
        """Score one episode (raises as :meth:`ask`, and :class:`JudgeAnswerError` on a malformed
        answer, with the call's usage)."""
        text, usage = await self.ask(quantifier_messages(trace, criteria), ("judgement", judgement_schema(criteria)))
        try:
            return dataclasses.replace(parse_judgement(text, criteria), usage=usage)
        except JudgeAnswerError as exc:
            if _looks_like_refusal(text):
                raise JudgeAnswerError(f"the judge refused: {text[:200]!r}", "refused", usage=usage) from exc
            exc.usage = usage
            raise

    async def propose(self, domain: str, category: str, succeeded: EpisodeTrace | None,
                      failed: EpisodeTrace | None) -> tuple[Criterion, ...]:
        """The critic's criteria for one (domain, category)."""
        text = _domain_text(domain)
        reply, usage = await self.ask(critic_messages(text, category, succeeded, failed), ("criteria", CRITERIA_SCHEMA))
        try:
            return parse_criteria(reply)
        except JudgeAnswerError as exc:
            exc.usage = usage
            raise

    async def verify(self, domain: str, category: str, source: Literal["critic", "file", "bundled"],
                     criteria: tuple[Criterion, ...], succeeded: EpisodeTrace | None,
                     failed: EpisodeTrace | None, notes: Sequence[str] = ()) -> CriteriaSet:
        """Quantify the example episodes ``repeats`` times each; drop unstable criteria and
        criteria on which the successful example does not score above the failed one."""
        notes = list(notes)
        examples = [(label, t) for label, t in (("successful", succeeded), ("failed", failed)) if t is not None]
        runs: dict[str, list[Judgement]] = {}
        errors: list[str] = []
        for label, trace in examples:
            results = await asyncio.gather(*(self._try_quantify(trace, criteria) for _ in range(self.config.repeats)))
            runs[label] = [r for r in results if isinstance(r, Judgement)]
            errors += [r for r in results if isinstance(r, str)]
        if errors:
            notes.append(f"{len(errors)} verification answers unusable (first: {errors[0]})")
        if succeeded is None or failed is None:
            notes.append("separation not checked: the run has no " + ("successful" if succeeded is None else "failed")
                         + " episode in this category")
        kept: list[Criterion] = []
        dropped: list[Dropped] = []
        verification: dict[str, Any] = {}
        for criterion in criteria:
            stability = _stability([runs.get(label, []) for label, _ in examples], criterion.name)
            separation = None
            if runs.get("successful") and runs.get("failed"):
                separation = (_mean_score(runs["successful"], criterion.name)
                              - _mean_score(runs["failed"], criterion.name))
            verification[criterion.name] = {"stability": stability, "separation": separation}
            if stability is not None and stability < self.config.min_stability:
                dropped.append(Dropped(criterion=criterion, stability=stability, separation=separation, reason=(
                    f"unstable: the most common value covered {100 * stability:.0f}% of {self.config.repeats} "
                    f"repeats on the same episode (at least {100 * self.config.min_stability:.0f}% needed)")))
            elif separation is not None and separation <= self.config.min_separation:
                dropped.append(Dropped(criterion=criterion, stability=stability, separation=separation, reason=(
                    f"does not separate: the successful example scored {separation:+.2f} against the failed one "
                    f"(more than {self.config.min_separation:+.2f} needed)")))
            else:
                kept.append(criterion)
        return CriteriaSet(domain=domain, category=category, source=source, criteria=tuple(kept),
                           dropped=tuple(dropped), verification=verification, notes=tuple(notes))

    async def _try_quantify(self, trace: EpisodeTrace, criteria: tuple[Criterion, ...]) -> Judgement | str:
        try:
            return await self.quantify(trace, criteria)
        except (JudgeAnswerError, AgentUnitError) as exc:
            return f"{type(exc).__name__}: {str(exc)[:200]}"


_REFUSAL_WORDS = ("i can't", "i cannot", "i'm sorry", "i am sorry", "unable to", "i won't", "i will not")


def _looks_like_refusal(text: str) -> bool:
    head = text.strip().lower()[:200]
    return "{" not in head and any(w in head for w in _REFUSAL_WORDS)


def _stability(groups: list[list[Judgement]], name: str) -> float | None:
    shares = []
    for group in groups:
        values = [j.values[name] for j in group if name in j.values]
        if values:
            shares.append(Counter(values).most_common(1)[0][1] / len(values))
    return sum(shares) / len(shares) if shares else None


def _mean_score(group: list[Judgement], name: str) -> float:
    scores = [j.scores[name] for j in group if name in j.scores]
    return sum(scores) / len(scores) if scores else 0.0


def _domain_text(domain: str) -> str:
    if domain in registry.domain_names():
        d = registry.get_domain(domain)
        return f"{d.title}: {d.description}" if d.description else d.title
    return domain



__all__ = ["REPLY_FORMATS", "Judge", "add_usage", "rejects_response_format", "response_format"]
