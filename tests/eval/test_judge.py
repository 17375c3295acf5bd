"""The judge over recorded runs, with the fake chat server scripted as critic, quantifier and verifier."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.cli.main import main
from agentunit_gym.core import registry
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.agents.fake_server import FakeChatServer
from agentunit_gym.eval.agents.model_client import OpenAIConfig
from agentunit_gym.eval.judge import JudgeConfig, judge_run, load_criteria_file, parse_judge_spec
from agentunit_gym.eval.judge.criteria import bundled_criteria
from agentunit_gym.eval.judge.prompts import CRITERIA_SCHEMA, parse_judgement, transcript
from agentunit_gym.eval.judge.run import read_criteria, read_judged
from agentunit_gym.eval.judging import judge_and_report
from tests.eval.judgekit import ScriptedJudge, write_run

THREE = [("t1", "echo solved", True, "Print the word."), ("t2", "echo nothing", False, "Print the other word."),
         ("t3", "echo solved wrongly", False, "Print a third word.")]


def config(server: FakeChatServer, criteria: Any = "critic", **model: Any) -> JudgeConfig:
    settings: dict[str, Any] = {"backoff_s": 0.01, **model}
    return JudgeConfig(OpenAIConfig(model="judge-m", base_url=server.base_url, **settings), criteria=criteria,
                       repeats=4, concurrency=3)


def test_critic_quantifier_verifier_and_agreement(tmp_path: Path) -> None:
    keys = write_run(tmp_path, THREE)
    scripted = ScriptedJudge()
    with FakeChatServer(scripted) as server:
        outcome, summary, report = judge_and_report(tmp_path, config(server))
    assert (outcome.judged, outcome.unjudged, outcome.skipped) == (3, 0, 0)
    assert scripted.calls.count("critic") == 1
    stored = read_criteria(tmp_path)
    assert stored is not None and stored["judge"] == "openai:judge-m"
    assert "goal_fidelity" in stored["prompts"]["quantifier"] and stored["prompts"]["critic"]
    (only,) = stored["sets"]
    assert (only["domain"], only["category"], only["source"]) == ("os", "general", "critic")
    # The verifier keeps the separating, stable criterion and drops the other two, saying why.
    assert [c["name"] for c in only["criteria"]] == ["solves_it"]
    reasons = {d["criterion"]["name"]: d["reason"] for d in only["dropped"]}
    assert reasons["flaky"].startswith("unstable") and reasons["flat"].startswith("does not separate")
    assert only["verification"]["solves_it"] == {"stability": 1.0, "separation": 1.0}
    assert only["verification"]["flaky"]["stability"] == 0.5
    judged = read_judged(tmp_path)
    assert set(judged) == set(keys)
    assert judged[keys[0]].scores == {"solves_it": 1.0} and judged[keys[1]].scores == {"solves_it": 0.0}
    assert all((v.usage.tokens_in or 0) > 0 and (v.usage.tokens_out or 0) > 0 for v in judged.values())
    # Only the kept criterion is put to the quantifier for the episodes.
    episode_calls = [c for c in scripted.calls if c != "critic" and "Print a third word" in c]
    assert len(episode_calls) == 1 and "- solves_it:" in episode_calls[0] and "flaky" not in episode_calls[0]
    metrics = summary["overall"]["metrics"]
    assert metrics["goal_fidelity"]["value"] == pytest.approx((0.9 + 0.2 + 0.9) / 3)
    assert metrics["goal_fidelity"]["n"] == 3 and metrics["goal_fidelity"]["ci_low"] is not None
    assert metrics["criterion:os/general/solves_it"]["value"] == pytest.approx(2 / 3)
    # t3 failed the env's check but the judge calls it achieved: 2 of 3 agree.
    agreement = summary["judge"]["agreement"]
    assert agreement["value"] == pytest.approx(2 / 3) and agreement["n"] == 3
    assert agreement["judged_achieved_env_failed"] == 1 and agreement["judged_failed_env_succeeded"] == 0
    assert agreement["ci_method"] == "wilson" and agreement["ci_low"] < 2 / 3 < agreement["ci_high"]
    html = report.read_text(encoding="utf-8")
    assert "Agreement with the env&#x27;s own check" in html or "Agreement with the env's own check" in html
    assert "unstable: the most common value" in html and "The agent solved it." in html


def test_garbage_refusal_and_timeout_are_unjudged_then_resumed_without_rejudging(tmp_path: Path) -> None:
    episodes = [("t1", "echo solved", True, "Task one."), ("t2", "echo no", False, "TASK-GARBAGE"),
                ("t3", "echo no", False, "TASK-REFUSE"), ("t4", "echo no", False, "TASK-SLOW"),
                ("t5", "echo solved", False, "TASK-BADVALUE")]
    keys = write_run(tmp_path, episodes)
    criteria = tmp_path.parent / f"{tmp_path.name}-criteria.yaml"
    criteria.write_text("criteria:\n  - name: solves_it\n    description: Does it?\n"
                        "    accepted_values: ['no', 'yes']\n", encoding="utf-8")

    def slow() -> dict[str, Any]:
        time.sleep(1.5)
        return {"role": "assistant", "content": "{}"}

    scripted = ScriptedJudge({
        "TASK-GARBAGE": lambda: {"role": "assistant", "content": "Sure! The episode looks fine to me."},
        "TASK-REFUSE": lambda: {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        "TASK-SLOW": slow,
        "TASK-BADVALUE": lambda: {"role": "assistant", "content": json.dumps(
            {"goal_fidelity": 1.4, "achieved": True, "criteria": {"solves_it": "maybe"}, "reason": "?"})},
    })
    with FakeChatServer(scripted) as server:
        cfg = config(server, criteria, request_timeout_s=0.3, turn_deadline_s=0.8, max_retries=1)
        outcome = asyncio.run(judge_run(tmp_path, cfg))
        assert (outcome.judged, outcome.unjudged) == (1, 4)
        judged = read_judged(tmp_path)
        kinds = {k: (v.status, v.error_kind) for k, v in judged.items()}
        assert kinds == {keys[0]: ("judged", ""), keys[1]: ("unjudged", "garbage"), keys[2]: ("unjudged", "refused"),
                         keys[3]: ("unjudged", "timeout"), keys[4]: ("unjudged", "garbage")}
        # Unjudged episodes carry no score of any kind.
        assert all(v.goal_fidelity is None and v.achieved is None and not v.scores
                   for k, v in judged.items() if k != keys[0])
        from agentunit_gym.eval.report.summary import summarize

        summary = summarize(tmp_path)
        block = summary["judge"]
        assert block["judged"] == 1 and block["unjudged"] == 4
        assert block["unjudged_reasons"] == {"garbage": 2, "refused": 1, "timeout": 1}
        assert summary["overall"]["metrics"]["goal_fidelity"]["n"] == 1
        assert summary["overall"]["metrics"]["goal_fidelity"]["value"] == pytest.approx(0.9)
        assert summary["overall"]["metrics"]["judged_coverage"]["value"] == pytest.approx(0.2)

        # The judge recovers: a second pass judges exactly the four unjudged episodes, never t1 again.
        scripted.special.clear()
        before = len(scripted.calls)
        again = asyncio.run(judge_run(tmp_path, cfg))
        assert (again.judged, again.unjudged, again.skipped) == (4, 0, 1)
        sent = scripted.calls[before:]
        assert len(sent) == 4 and not any("Task one." in c for c in sent)
        assert all(v.status == "judged" for v in read_judged(tmp_path).values())
        # Nothing left: a third pass sends nothing.
        before = len(scripted.calls)
        assert asyncio.run(judge_run(tmp_path, cfg)).skipped == 5 and len(scripted.calls) == before
        # Another judge model on the same run is refused, not mixed in.
        other = JudgeConfig(OpenAIConfig(model="other", base_url=server.base_url), criteria=criteria)
        with pytest.raises(ConfigError, match="judged by openai:judge-m"):
            asyncio.run(judge_run(tmp_path, other))


def test_a_critic_that_returns_garbage_falls_back_to_the_bundled_criteria(tmp_path: Path) -> None:
    write_run(tmp_path, THREE)

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if "propose criteria" in body["messages"][0]["content"]:
            return {"role": "assistant", "content": "criteria: be good"}
        return ScriptedJudge()(body)

    with FakeChatServer(responder) as server:
        asyncio.run(judge_run(tmp_path, config(server)))
    stored = read_criteria(tmp_path)
    assert stored is not None
    (only,) = stored["sets"]
    assert only["source"] == "bundled" and "the critic gave no usable criteria" in only["notes"][0]
    bundled = {c.name for c in bundled_criteria("os")["*"]}
    assert {c["name"] for c in only["criteria"]} | {d["criterion"]["name"] for d in only["dropped"]} == bundled


def test_every_domain_and_category_gets_its_own_criteria_set(tmp_path: Path) -> None:
    write_run(tmp_path, THREE)
    write_run(tmp_path, [("d1", "SELECT solved", True, "Count rows."), ("d2", "SELECT 1", False, "Sum rows.")],
              domain="db", env_id="AgentUnit/DB-v0", category="select")
    write_run(tmp_path, [("k1", "get_relations(Paris) solved", True, "Which river?"),
                         ("k2", "get_relations(Lyon)", False, "Which mountain?")],
              domain="kg", env_id="AgentUnit/KG-v0", category="multi-hop")
    write_run(tmp_path, [("w1", "search[red cotton t-shirt] then click[buy now] solved", True, "A red t-shirt."),
                         ("w2", "search[lamp]", False, "A blue sofa.")],
              domain="webshop", env_id="AgentUnit/WebShop-v0", category="fashion")
    scripted = ScriptedJudge()
    with FakeChatServer(scripted) as server:
        _, summary, _ = judge_and_report(tmp_path, config(server, "bundled"))
    stored = read_criteria(tmp_path)
    assert stored is not None
    assert sorted(s["domain"] + "/" + s["category"] for s in stored["sets"]) == ["db/select", "kg/multi-hop",
                                                                               "os/general", "webshop/fashion"]
    assert "critic" not in scripted.calls
    assert set(summary["judge"]["per_domain"]) == {"db", "kg", "os", "webshop"}
    names = set(summary["overall"]["metrics"])
    assert "criterion:db/select/query_targets_question" in names and "criterion:os/general/answer_form" in names
    assert "criterion:kg/multi-hop/answer_commitment" in names
    assert "criterion:webshop/fashion/attribute_matching" in names


def test_compare_reports_the_judged_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    write_run(good, [(f"t{i}", "echo solved", True, f"Task {i}.") for i in range(6)])
    write_run(bad, [(f"t{i}", "echo no", False, f"Task {i}.") for i in range(6)])
    with FakeChatServer(ScriptedJudge()) as server:
        for run in (good, bad):
            assert main(["judge", str(run), "--judge", "openai:judge-m", "--base-url", server.base_url,
                         "--criteria", "bundled", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(bad), str(good), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["goal_fidelity"]["a"] == pytest.approx(0.2) and rows["goal_fidelity"]["b"] == pytest.approx(0.9)
    assert rows["goal_fidelity"]["verdict"] == "better"


def test_eval_with_judge_judges_the_run_at_the_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with FakeChatServer(ScriptedJudge()) as server:
        code = main(["eval", "--env", "DB-v0", "--backend", "sqlite", "-n", "3", "--agent", "oracle", "--output",
                     str(out), "--judge", "openai:judge-m", "--judge-base-url", server.base_url,
                     "--criteria", "bundled"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Judged by openai:judge-m" in printed and "judge_agreement" in printed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge"]["judged"] == 3
    # The oracle succeeds and the scripted judge sees no "solved": every judgement disagrees with the check.
    assert summary["judge"]["agreement"]["value"] == 0.0


def test_judgement_parsing_is_strict() -> None:
    from agentunit_gym.eval.judge.criteria import Criterion
    from agentunit_gym.eval.judge.prompts import JudgeAnswerError

    crit = (Criterion(name="form", description="d", accepted_values=("bad", "ok", "good")),)
    ok = parse_judgement('```json\n{"goal_fidelity": 0.5, "achieved": true, "criteria": {"form": "OK"}}\n```', crit)
    assert ok.scores == {"form": 0.5} and ok.achieved is True
    for bad in ('{"goal_fidelity": "high", "achieved": true, "criteria": {"form": "ok"}}',
                '{"goal_fidelity": 0.5, "achieved": "yes", "criteria": {"form": "ok"}}',
                '{"goal_fidelity": 0.5, "achieved": true, "criteria": {}}', "no json", "[1, 2]"):
        with pytest.raises(JudgeAnswerError):
            parse_judgement(bad, crit)


def test_transcript_never_shows_the_env_verdict(tmp_path: Path) -> None:
    from tests.eval.tracekit import step, trace

    text = transcript(trace("t", [step(1, arg="ls")], success=True, components={"exact_match": True}))
    assert "success" not in text.lower() and "reward" not in text.lower() and "exact_match" not in text


def test_bundled_criteria_parse_for_every_registered_domain() -> None:
    for domain in registry.domains():
        if domain.criteria is not None:
            table = bundled_criteria(domain.name)
            assert table["*"] and all(len(c.accepted_values) >= 2 for c in table["*"])
    assert bundled_criteria("os") and bundled_criteria("db") and bundled_criteria("kg") and bundled_criteria("webshop")


def test_criteria_file_errors_name_the_place(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("os:\n  criteria:\n    - name: a\n      description: d\n      accepted_values: [x]\n")
    with pytest.raises(ConfigError, match=r"c.yaml: os: criteria, criterion 1: accepted_values"):
        load_criteria_file(path)
    path.write_text("criteria:\n  - name: a\n    description: d\n    accepted_values: [no, yes]\n")
    with pytest.raises(ConfigError, match="quote the values"):
        load_criteria_file(path)
    path.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="expected 'criteria"):
        load_criteria_file(path)
    with pytest.raises(ConfigError, match="openai:<model>"):
        parse_judge_spec("gpt-4o")


def test_answers_are_asked_for_by_json_schema(tmp_path: Path) -> None:
    write_run(tmp_path, THREE)
    with FakeChatServer(ScriptedJudge()) as server:
        outcome = asyncio.run(judge_run(tmp_path, config(server)))
    assert outcome.judged == 3 and outcome.reply_format == "json_schema"
    formats = [body.get("response_format") for body in server.requests]
    assert all(f is not None and f["type"] == "json_schema" for f in formats)
    names = [f["json_schema"]["name"] for f in formats]
    assert names.count("criteria") == 1 and names.count("judgement") == len(names) - 1
    # The quantifier's schema allows exactly each kept criterion's accepted values.
    last = formats[-1]["json_schema"]["schema"]
    assert last["properties"]["criteria"]["properties"] == {"solves_it": {"type": "string",
                                                                          "enum": ["no", "partly", "yes"]}}
    assert last["required"] == ["goal_fidelity", "achieved", "criteria", "reason"]
    assert read_criteria(tmp_path)["reply_format"] == "json_schema"  # type: ignore[index]


def test_a_server_that_refuses_response_format_gets_plain_requests(tmp_path: Path) -> None:
    write_run(tmp_path, THREE)
    with FakeChatServer(ScriptedJudge(), refuse_response_format=400) as server:
        cfg = JudgeConfig(OpenAIConfig(model="judge-m", base_url=server.base_url, backoff_s=0.01), repeats=2,
                          concurrency=1)
        outcome = asyncio.run(judge_run(tmp_path, cfg))
    assert (outcome.judged, outcome.unjudged, outcome.reply_format) == (3, 0, "plain")
    # OpenAI's json_schema form refused (a 400 naming response_format, never retried), then
    # llama-cpp-python's json_object form, then every request without response_format.
    assert server.statuses[:2] == [400, 400] and server.statuses.count(400) == 2
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert server.requests[1]["response_format"] == {"type": "json_object", "schema": CRITERIA_SCHEMA}
    assert all("response_format" not in body for body in server.requests[2:])
    assert read_criteria(tmp_path)["reply_format"] == "plain"  # type: ignore[index]


def test_garbage_answers_record_their_token_usage(tmp_path: Path) -> None:
    keys = write_run(tmp_path, [("t1", "echo no", False, "TASK-GARBAGE")])
    criteria = tmp_path.parent / f"{tmp_path.name}-criteria.yaml"
    criteria.write_text("criteria:\n  - name: solves_it\n    description: Does it?\n"
                        "    accepted_values: ['no', 'yes']\n", encoding="utf-8")
    scripted = ScriptedJudge({"TASK-GARBAGE": lambda: {"role": "assistant", "content": "Looks fine to me!"}})
    with FakeChatServer(scripted) as server:
        outcome = asyncio.run(judge_run(tmp_path, config(server, criteria)))
    line = read_judged(tmp_path)[keys[0]]
    assert line.status == "unjudged" and line.error_kind == "garbage"
    assert (line.usage.tokens_in or 0) > 0 and (line.usage.tokens_out or 0) > 0
    # The verifier's 4 repeats on the same episode and the episode's own call: 5 garbage answers, all counted.
    assert len(server.requests) == 5 and outcome.nothing_judged
    assert outcome.usage.tokens_in == 5 * (line.usage.tokens_in or 0)
    assert read_criteria(tmp_path)["usage"]["tokens_in"] == outcome.usage.tokens_in  # type: ignore[index]


def test_judge_exits_4_when_nothing_could_be_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, THREE)
    with FakeChatServer(lambda body: {"role": "assistant", "content": "I like it."}) as server:
        code = main(["judge", str(tmp_path), "--judge", "openai:judge-m", "--base-url", server.base_url,
                     "--criteria", "bundled", "--judge-repeats", "1", "--quiet"])
        assert code == 4
        assert "nothing could be judged: all 3 answers were unusable (first: garbage" in capsys.readouterr().err
        # Once one episode is judged, the run has judged metrics: exit 0.
        server.responder = ScriptedJudge()
        assert main(["judge", str(tmp_path), "--judge", "openai:judge-m", "--base-url", server.base_url,
                     "--criteria", "bundled", "--judge-repeats", "1", "--quiet"]) == 0


def test_llama_cpp_pythons_500_for_json_schema_is_not_retried_and_moves_to_json_object(tmp_path: Path) -> None:
    write_run(tmp_path, THREE)
    with FakeChatServer(ScriptedJudge(), refuse_response_format=500) as server:
        cfg = JudgeConfig(OpenAIConfig(model="judge-m", base_url=server.base_url, backoff_s=0.01), repeats=2,
                          concurrency=1)
        # The server's 500 for json_schema is a request validation error: not retried, and
        # json_object is refused alike here, so the judge ends up asking in plain text.
        outcome = asyncio.run(judge_run(tmp_path, cfg))
    assert (outcome.judged, outcome.reply_format) == (3, "plain")
    assert server.statuses[:2] == [500, 500] and server.statuses.count(500) == 2
