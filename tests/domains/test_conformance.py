"""The domain conformance suite: every registered domain, the out-of-tree example included,
through the same checks on its embedded backend.

Like tests/backends/sandbox_conformance.py for sandboxes: nothing here names a domain. The
cases come from the registry (tests/domains/conftest.py), and every reply is derived from
the domain's description and bundled tasks (reference solutions, tool table, worked example),
so a domain that registers later runs all of it without an edit. The checks:

- gymnasium's ``check_env`` on the bare env;
- the finish-reason matrix through the standard stack: COMPLETE, INVALID_FORMAT,
  INVALID_ACTION, TASK_LIMIT, CONTEXT_LIMIT, and the continue policy;
- hypothesis-generated replies (any Unicode, control characters, megabyte replies, the
  domain's own calls with junk arguments) never raise and are always classified;
- every trap of the domain's bundled library: ignored is refused, fallen for is attempted,
  the score unchanged;
- the prompt: the first observation states the task and the grammar, the worked example is
  in the domain's grammar and fits the tool table;
- loaders: the bundled suite is native, reads back the same, survives a write and re-read,
  and no foreign loader claims it;
- an oracle sample: reference solutions reach reward 1 and COMPLETE.

Pickling and gymnasium's vector envs run per registered domain in test_pickling.py and
test_vector_envs.py (the same cases).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentunit_gym  # noqa: F401  (registers the ids)
from agentunit_gym.core import ActionIssue, FinishReason
from agentunit_gym.core.actions import Action, ActionError, parse_json_call, render_json_call
from agentunit_gym.core.chat import example_turns, system_prompt
from agentunit_gym.core.env import AgentEnv
from agentunit_gym.core.trace import EpisodeTrace, Flag
from agentunit_gym.tasks.spec import ReferenceStep
from agentunit_gym.wrappers import InjectTraps, load_trap_library, make_eval_env
from agentunit_gym.wrappers.classify import REPLY_CLASSES
from agentunit_gym.wrappers.context import make_token_counter
from agentunit_gym.wrappers.traps import fill
from tests.domains.conformkit import (
    PROSE,
    UNKNOWN_TOOL,
    DomainCase,
    look_reply,
    oracle_sample,
    probe_task,
    run_reference,
)

pytestmark = [pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")]

BIG_CONTEXT = 1_000_000
MESSAGE_OVERHEAD = 4
"""LimitContext's default cost of a message besides its text."""


def _base(env: gym.Env[str, str]) -> AgentEnv[Any]:
    base = env.unwrapped
    assert isinstance(base, AgentEnv)
    return base


@pytest.fixture(scope="module")
def plain(domain_case: DomainCase) -> Iterator[gym.Env[str, str]]:
    """The bare registered env on the embedded backend."""
    env = domain_case.make()
    yield env
    env.close()


@pytest.fixture(scope="module")
def stack(domain_case: DomainCase) -> Iterator[gym.Env[str, str]]:
    """The standard stack under AgentBench's policy (an invalid reply ends the episode)."""
    env = make_eval_env(domain_case.env_id, invalid_policy="terminate", max_context_tokens=BIG_CONTEXT,
                        traps=False, **domain_case.kwargs)
    yield env
    env.close()


def _trace(info: dict[str, Any], steps: int, reason: FinishReason) -> EpisodeTrace:
    trace = info["trace"]
    assert isinstance(trace, EpisodeTrace)
    assert (len(trace.steps), trace.finish_reason) == (steps, reason)
    assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace
    return trace


# ------------------------------------------------------------------------- gymnasium


def test_check_env(domain_case: DomainCase, plain: gym.Env[str, str]) -> None:
    """gymnasium's checker on every env id of the domain (the first one's env is reused)."""
    for spec in domain_case.domain.envs:
        assert spec.id in gym.registry
        env = plain if spec.id == domain_case.env_id else gym.make(spec.id, **domain_case.kwargs)
        try:
            check_env(env.unwrapped, skip_render_check=True)
            assert _base(env).DOMAIN is domain_case.domain and _base(env).domain == domain_case.domain.name
        finally:
            if env is not plain:
                env.close()


# --------------------------------------------------------------- finish reasons


def test_complete(domain_case: DomainCase, stack: gym.Env[str, str]) -> None:
    task = probe_task(_base(stack))
    infos, (_, reward, terminated, truncated, last) = run_reference(stack, task)
    assert (reward, terminated, truncated) == (1.0, True, False), last.get("finish_detail")
    assert last["finish_reason"] is FinishReason.COMPLETE and last["score"]["success"] is True
    assert [i["reply_class"] for i in infos] == ["action"] * len(task.reference_solution)
    trace = _trace(last, len(task.reference_solution), FinishReason.COMPLETE)
    assert trace.domain == domain_case.domain.name and trace.backend == domain_case.kwargs["backend"]


def test_invalid_format(stack: gym.Env[str, str]) -> None:
    stack.reset(seed=0, options={"task_id": probe_task(_base(stack)).id})
    _, reward, terminated, truncated, info = stack.step(PROSE)
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["finish_reason"] is FinishReason.INVALID_FORMAT and info["action_error"]["issue"] == "no_call"
    assert _trace(info, 1, FinishReason.INVALID_FORMAT).steps[0].flags == (Flag.INVALID_FORMAT,)


def test_invalid_action(stack: gym.Env[str, str]) -> None:
    stack.reset(seed=0, options={"task_id": probe_task(_base(stack)).id})
    _, reward, terminated, truncated, info = stack.step(UNKNOWN_TOOL)
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["finish_reason"] is FinishReason.INVALID_ACTION and info["action_error"]["issue"] == "unknown_tool"
    assert Flag.HALLUCINATION in _trace(info, 1, FinishReason.INVALID_ACTION).steps[0].flags


def test_task_limit(domain_case: DomainCase, stack: gym.Env[str, str]) -> None:
    base = _base(stack)
    task = probe_task(base)
    _, info = stack.reset(seed=0, options={"task_id": task.id})
    limit = info["max_steps"]
    assert limit == (task.max_steps or domain_case.domain.step_limit)
    outcomes = [stack.step(look_reply(base, task)) for _ in range(limit)]  # keeps looking, never commits
    assert [o[2:4] for o in outcomes] == [(False, False)] * (limit - 1) + [(False, True)]
    last = outcomes[-1][4]
    assert last["finish_reason"] is FinishReason.TASK_LIMIT and last["score"]["success"] is False
    assert outcomes[-1][1] == 0.0
    _trace(last, limit, FinishReason.TASK_LIMIT)


def test_context_limit(domain_case: DomainCase, stack: gym.Env[str, str]) -> None:
    """A context that holds the prompt and the reply but not one more observation ends at the first step."""
    base = _base(stack)
    task = probe_task(base)
    _, info = stack.reset(seed=0, options={"task_id": task.id})
    reply = look_reply(base, task)
    # Room for the prompt and the reply (as the stack's counter counts them, with the message
    # overhead), and one token more: any observation costs at least the overhead.
    room = info["context_tokens"] + make_token_counter("approx").count(reply) + MESSAGE_OVERHEAD + 1
    tight = make_eval_env(domain_case.env_id, max_context_tokens=room, traps=False, **domain_case.kwargs)
    try:
        _, reset_info = tight.reset(seed=0, options={"task_id": task.id})
        assert reset_info["context_tokens"] == info["context_tokens"]
        observation, reward, terminated, truncated, last = tight.step(reply)
        assert observation, "a looking step must show something"
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert last["finish_reason"] is FinishReason.CONTEXT_LIMIT and last["context_tokens"] <= room
        assert Flag.CONTEXT_LIMIT in _trace(last, 1, FinishReason.CONTEXT_LIMIT).steps[-1].flags
    finally:
        tight.close()


def test_continue_policy_shows_feedback_and_goes_on(domain_case: DomainCase) -> None:
    env = make_eval_env(domain_case.env_id, invalid_policy="continue", traps=False, **domain_case.kwargs)
    try:
        task = probe_task(_base(env))
        env.reset(seed=0, options={"task_id": task.id})
        for reply, reason in ((PROSE, "invalid_format"), (UNKNOWN_TOOL, "invalid_action")):
            observation, reward, terminated, truncated, info = env.step(reply)
            assert (reward, terminated, truncated) == (0.0, False, False) and info["finish_reason"] == ""
            assert info["reply_class"] == reason and observation.strip()
    finally:
        env.close()


# ------------------------------------------------------------------ any reply


def _near_valid(base: AgentEnv[Any]) -> st.SearchStrategy[str]:
    """The domain's own calls, in both forms, with junk where the arguments go: as written, in
    the wrong case, with the closing half missing, or cut after a few characters."""
    tools = list(base.tool_table.values())

    def call(tool_index: int, junk: str, form: str, edit: int) -> str:
        spec = tools[tool_index]
        arguments: dict[str, Any] = {p.name: junk for p in spec.params}
        text = render_json_call(spec.name, arguments) if form == "json" else base.render_action(
            ReferenceStep(tool=spec.name, arguments=arguments))
        assert isinstance(text, str)
        if edit == 1:  # the markers in the wrong case
            return text.swapcase()
        if edit == 2:  # the closing half missing (an unclosed block or bracket)
            return text[: max(1, len(text) - 1 - len(text) // 3)]
        return text[:edit] if edit > 2 else text

    junk = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
    return st.builds(call, st.integers(0, len(tools) - 1), junk, st.sampled_from(["react", "json"]),
                     st.sampled_from([0, 0, 1, 2, 5, 12]))


_junk = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
_controls = st.text(st.characters(min_codepoint=0, max_codepoint=0x1F), min_size=1, max_size=50)
_megabyte = st.builds(lambda piece, n: (piece * (1_000_000 // max(1, len(piece)) + 1))[:n],
                      st.text(min_size=1, max_size=8), st.integers(500_000, 1_100_000))
_json_junk = st.builds(lambda text: f'{{"name": {json.dumps(text)}, "arguments": {{"q": {shlex.quote(text)!r}}}}}',
                       _junk)


@pytest.fixture(scope="module")
def open_stack(domain_case: DomainCase) -> Iterator[gym.Env[str, str]]:
    env = make_eval_env(domain_case.env_id, max_context_tokens=BIG_CONTEXT, **domain_case.kwargs)
    yield env
    env.close()


@settings(deadline=None, database=None, max_examples=25,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_any_reply_is_classified(open_stack: gym.Env[str, str], data: st.DataObject) -> None:
    base = _base(open_stack)
    reply = data.draw(st.one_of(_junk, _controls, _megabyte, _json_junk, _near_valid(base)))
    open_stack.reset(seed=0)
    observation, reward, terminated, truncated, info = open_stack.step(reply)
    assert isinstance(observation, str) and isinstance(reward, float)
    assert info["reply_class"] in REPLY_CLASSES
    if info["reply_class"].startswith("invalid"):
        assert info["action_error"]["reason"] == info["reply_class"]
        assert info["action_error"]["issue"] in {i.value for i in ActionIssue}
        assert Flag.INVALID_FORMAT in info["flags"] or Flag.INVALID_ACTION in info["flags"]
    else:
        assert info["action"]["tool"] in base.tool_table
    if terminated or truncated:
        assert info["finish_reason"] in set(FinishReason)
        trace = info["trace"]
        assert EpisodeTrace.model_validate_json(trace.model_dump_json()) == trace
        assert len(trace.steps[0].raw_action) <= 4100  # capped, even for a megabyte reply


# ---------------------------------------------------------------------- traps


def _trap_ids(domain_case: DomainCase) -> list[str]:
    if domain_case.domain.traps is None:
        pytest.skip(f"the {domain_case.domain.name} domain ships no trap library")
    return load_trap_library(domain_case.domain.name).ids()


def _trap_episode(env: gym.Env[str, str], task_id: str, trap: str | None, fall: bool) -> dict[str, Any]:
    """One episode of the task's reference solution with ``trap`` active; falling for it is
    its example attempt sent just before the committing step. The episode is then driven to
    its end (by invalid replies up to the step limit, when the attempt moved the agent off
    its path)."""
    base = _base(env)
    observation, _ = env.reset(seed=1, options={"task_id": task_id, "trap": trap})
    task = base.task
    assert task is not None
    replies: list[Any] = [base.render_action(s) for s in task.reference_solution]
    attempt_at = -1
    if fall:
        layer: Any = env
        while not isinstance(layer, InjectTraps):
            layer = layer.env
        assert layer.active_trap is not None and layer._active is not None
        call = layer.active_trap.example_attempt
        arguments = {k: fill(v, layer._active.values) if isinstance(v, str) else v for k, v in call.arguments.items()}
        attempt_at = len(replies) - 1
        replies.insert(attempt_at, base.render_action(ReferenceStep(tool=call.tool, arguments=arguments)))
    infos: list[dict[str, Any]] = []
    last: tuple[Any, ...] = ()
    for reply in [*replies, *[PROSE] * base.max_steps]:
        if not isinstance(reply, str):
            reply = reply.complete(observation)
        last = env.step(reply)
        observation = last[0]
        infos.append(last[4])
        if last[2] or last[3]:
            break
    assert last[2] or last[3], "the episode must end within its step limit"
    return {"reward": last[1], "score": last[4]["score"], "infos": infos, "trap": last[4]["trap"],
            "finish": last[4]["finish_reason"], "attempt": infos[attempt_at] if fall else None}


def test_every_trap_is_refused_or_attempted(domain_case: DomainCase) -> None:
    ids = _trap_ids(domain_case)
    env = make_eval_env(domain_case.env_id, max_context_tokens=None, **domain_case.kwargs)
    try:
        task = probe_task(_base(env))
        baseline = _trap_episode(env, task.id, None, fall=False)
        assert baseline["reward"] == 1.0 and baseline["trap"] == {}
        for trap_id in ids:
            ignored = _trap_episode(env, task.id, trap_id, fall=False)
            assert (ignored["trap"]["trap_id"], ignored["trap"]["verdict"]) == (trap_id, "refused"), ignored["trap"]
            assert ignored["trap"]["evidence"] == [] and ignored["trap"]["delivered"] is True
            assert (ignored["score"], ignored["reward"]) == (baseline["score"], 1.0), trap_id
            fell = _trap_episode(env, task.id, trap_id, fall=True)
            assert fell["trap"]["verdict"] == "attempted" and fell["trap"]["evidence"], (trap_id, fell["trap"])
            assert Flag.TRAP_ATTEMPT in fell["attempt"]["flags"], trap_id
            if fell["finish"] is FinishReason.COMPLETE:  # "succeeded but unsafe": the trap touched nothing graded
                assert fell["score"] == baseline["score"], trap_id
    finally:
        env.close()


# --------------------------------------------------------------------- prompt


def test_prompt_states_the_task_and_the_grammar(domain_case: DomainCase, plain: gym.Env[str, str]) -> None:
    task = probe_task(_base(plain))
    observation, info = plain.reset(seed=0, options={"task_id": task.id})
    assert task.instruction in observation
    assert info["grammar"] and info["grammar"] in observation
    domain = domain_case.domain
    assert (info["domain"], info["max_steps"]) == (domain.name, task.max_steps or domain.step_limit)
    named = {t["function"]["name"] if "function" in t else t["name"] for t in info["tools"]}
    assert named == set(_base(plain).tool_table)
    prompt = domain.prompt
    assert system_prompt(info, "react").startswith(prompt.system)
    assert len(example_turns(info, "react")) == 2 * len(prompt.example)


def test_reset_info_names_the_split_and_the_backend(domain_case: DomainCase, plain: gym.Env[str, str]) -> None:
    base = _base(plain)
    one_per_split = {t.split: t for t in sorted(base.tasks, key=lambda t: t.id)}
    assert set(one_per_split) == {"train", "test"}  # every bundled task has its split
    for split, task in one_per_split.items():
        _, info = plain.reset(seed=0, options={"task_id": task.id})
        assert (info["task_id"], info["split"]) == (task.id, split)
        assert info["backend"] == base.backend_name == domain_case.domain.embedded_backend.name
    unsplit = one_per_split["train"].model_copy(update={"split": None})  # a task file without splits
    assert plain.reset(seed=0, options={"task": unsplit})[1]["split"] == ""


def test_worked_example_fits_the_env(domain_case: DomainCase, plain: gym.Env[str, str]) -> None:
    """Each example step is the domain's grammar (its ReAct reply is no format error) and a
    call of a tool the env has, with arguments its schema accepts."""
    base = _base(plain)
    example = domain_case.domain.prompt.example
    for step in example:
        assert step.tool in base.tool_table, step.tool
        as_json = parse_json_call(render_json_call(step.tool, dict(step.arguments)), base.tool_table)
        assert isinstance(as_json, Action) and as_json.tool == step.tool, as_json
        parsed = base.parse_action(step.react)
        if isinstance(parsed, ActionError):  # a state-dependent refusal (no such variable yet), never the grammar
            assert parsed.reason is FinishReason.INVALID_ACTION, (step.react, parsed)
        else:
            assert parsed.tool in base.tool_table
    if example:
        assert base.tool_table[example[-1].tool].commits, "the worked example ends with a committing call"


# -------------------------------------------------------------------- loaders


def test_bundled_suite_is_native_and_reads_back(domain_case: DomainCase, tmp_path: Path) -> None:
    domain = domain_case.domain
    bundled = domain.bundled_tasks()
    assert bundled, f"the {domain.name} domain bundles no task"
    assert domain.suite is not None and domain.detect_format(domain.suite) == "native"
    for loader in domain.loaders:
        assert loader.detect(domain.suite) is False, loader.name
        assert loader.detect(tmp_path / "missing") is False, loader.name
    result = domain.load_tasks(domain.suite)
    assert result.problems == () or list(result.problems) == []
    assert sorted(t.id for t in result.tasks) == sorted(t.id for t in bundled)
    # Written out as a native file and read again, every task is the same (split and source aside).
    path = tmp_path / "suite.yaml"
    dumped = [t.model_dump(mode="json", exclude={"source", "split"}) for t in bundled]
    path.write_text(yaml.safe_dump({"tasks": dumped}, allow_unicode=True), encoding="utf-8")
    again = domain.load_tasks(path, format="native")
    assert [t.model_dump(exclude={"source", "split"}) for t in again.tasks] == \
        [t.model_dump(exclude={"source", "split"}) for t in bundled]
    assert all(isinstance(t, domain.task_model) for t in again.tasks)


def test_env_reads_a_task_file(domain_case: DomainCase, tmp_path: Path) -> None:
    task = domain_case.domain.bundled_tasks()[0]
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump({"tasks": [task.model_dump(mode="json", exclude={"source", "split"})]}),
                    encoding="utf-8")
    env = domain_case.make(tasks=str(path))
    try:
        assert [t.id for t in _base(env).suite] == [task.id]
    finally:
        env.close()


# --------------------------------------------------------------------- oracle


def test_oracle_sample_completes(plain: gym.Env[str, str]) -> None:
    base = _base(plain)
    sample = oracle_sample(base)
    assert sample
    for task in sample:
        infos, (_, reward, terminated, truncated, last) = run_reference(plain, task)
        assert (reward, terminated, truncated) == (1.0, True, False), (task.id, last.get("finish_detail"))
        assert last["finish_reason"] is FinishReason.COMPLETE and last["score"]["success"] is True, task.id
        assert len(infos) <= len(task.reference_solution)
