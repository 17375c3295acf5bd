"""The Domain description and the registry: validation, loaders with per-item problems, broken entries."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.core import registry
from agentunit_gym.core.domain import (
    BackendSpec,
    Domain,
    EnvSpec,
    ExampleStep,
    Headline,
    Prompt,
    TaskLoader,
)
from agentunit_gym.errors import ConfigError, DomainError
from agentunit_gym.tasks.loader import LoadProblem, LoadResult
from tests.core.toy import ToyTask


def _domain(**changes: Any) -> Domain:
    fields: dict[str, Any] = {
        "name": "toy",
        "title": "Toy",
        "envs": (EnvSpec("AgentUnit/Toy-v0", "tests.core.toy:ToyEnv"),),
        "step_limit": 4,
        "backends": (BackendSpec("toy", "in memory", embedded=True), BackendSpec("remote", "x", needs_docker=True)),
        "task_model": ToyTask,
        "prompt": Prompt("You say numbers.", (ExampleStep("Task: say 1", "Act: answer(1)", "answer", {"text": "1"}),)),
    }
    fields.update(changes)
    return Domain(**fields)


def test_a_valid_description_answers_its_questions() -> None:
    d = _domain()
    assert d.env_ids == ("AgentUnit/Toy-v0",)
    assert d.envs[0].short_id == "Toy-v0"
    assert d.backend_names == ("toy", "remote")
    assert d.embedded_backend.name == "toy"
    assert d.backend("remote").needs_docker
    with pytest.raises(ConfigError, match="no backend 'mysql'"):
        d.backend("mysql")
    with pytest.raises(TypeError):
        d.prompt.example[0].arguments["text"] = "2"  # type: ignore[index]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "Toy"}, "lowercase identifier"),
        ({"envs": ()}, "no env id"),
        ({"step_limit": 0}, "step_limit"),
        ({"backends": (BackendSpec("a", "x"), BackendSpec("b", "y"))}, "exactly one backend"),
        ({"backends": (BackendSpec("auto", "x", embedded=True),)}, "not 'auto'"),
        ({"task_model": dict}, "TaskSpec subclass"),
    ],
)
def test_an_inconsistent_description_is_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _domain(**changes)


def test_env_spec_checks_its_id_and_entry_point() -> None:
    with pytest.raises(ConfigError, match="Namespace/Name-vN"):
        EnvSpec("Toy", "m:C")
    with pytest.raises(ConfigError, match="module:Class"):
        EnvSpec("A/Toy-v0", "m.C")


def test_native_loader_keeps_going_past_bad_items(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "- {id: ok1, instruction: hi, answer: '1'}\n"
        "- {id: bad, instruction: hi, nonsense: 1}\n"
        "- {id: ok2, instruction: hi}\n"
        "- {id: ok1, instruction: again}\n",
        encoding="utf-8",
    )
    (tmp_path / "b.yaml").write_text("[unclosed", encoding="utf-8")
    result = _domain(suite=tmp_path).load_tasks(tmp_path)
    assert [t.id for t in result.tasks] == ["ok1", "ok2"]
    by_task = {p.task_id: p for p in result.problems}
    assert by_task["bad"].field == "nonsense" and by_task["bad"].source.endswith("a.yaml")
    assert "duplicate task id" in by_task["ok1"].message
    assert any(p.source.endswith("b.yaml") and "not valid YAML" in p.message for p in result.problems)
    assert len(result.problems) == 3


def test_format_detection_picks_a_foreign_loader(tmp_path: Path) -> None:
    marker = tmp_path / "foreign.txt"
    marker.write_text("x", encoding="utf-8")

    def load(path: Path) -> LoadResult:
        return LoadResult((ToyTask(id="f1", instruction="from foreign"),), (LoadProblem(str(path), "item 2 bad"),))

    d = _domain(loaders=(TaskLoader("foreign", "txt files", lambda p: p.suffix == ".txt", load),))
    assert d.detect_format(marker) == "foreign"
    assert d.detect_format(tmp_path / "x.yaml") == "native"
    result = d.load_tasks(marker)
    assert [t.id for t in result.tasks] == ["f1"] and result.problems[0].message == "item 2 bad"
    with pytest.raises(ConfigError, match="formats: native, foreign"):
        d.load_tasks(marker, format="other")


def test_headline_is_a_stratified_mean() -> None:
    from agentunit_gym.core.score import Score
    from agentunit_gym.core.trace import EpisodeTrace

    def t(stratum: str, ok: bool) -> EpisodeTrace:
        return EpisodeTrace(episode_id="e", env_id="AgentUnit/Toy-v0", domain="toy", backend="toy", task_id="t",
                            started_at=0.0, score=Score(reward=float(ok), success=ok, components={"s": stratum}))

    head = Headline("toy_headline", "mean of A and B", stratum=lambda tr: str(tr.score.components["s"])
                    if tr.score else None, combine=lambda m: (m.get("A", 0.0) + m.get("B", 0.0)) / 2)
    # A: 1 of 2, B: 1 of 1 -> (0.5 + 1.0) / 2, not 2/3.
    assert head.compute([t("A", True), t("A", False), t("B", True)]) == pytest.approx(0.75)
    assert head.compute([]) is None


class _EntryPoint:
    def __init__(self, name: str, value: str) -> None:
        self.name, self.value = name, value


BROKEN_MODULE = "tests.core.broken_domain_does_not_exist"


def test_a_broken_third_party_domain_is_set_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.entry_points

    def entry_points(group: str) -> Any:
        found = list(real(group=group))
        return [*found, _EntryPoint("ghost", f"{BROKEN_MODULE}:DOMAIN"), _EntryPoint("notadomain", "json:dumps")]

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    registry.reload()
    try:
        names = registry.domain_names()
        broken = {b.name: b for b in registry.broken_domains()}
        assert "ghost" not in names and "notadomain" not in names
        assert "does not load" in broken["ghost"].reason
        assert "not an agentunit_gym Domain" in broken["notadomain"].reason
        with pytest.raises(DomainError, match="does not load") as info:
            registry.get_domain("ghost")
        assert info.value.domain == "ghost"
        with pytest.raises(DomainError, match="unknown domain 'nope'"):
            registry.get_domain("nope")
    finally:
        monkeypatch.undo()
        registry.reload()


def test_built_ins_are_found_without_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    # An install that predates the entry points (stale editable metadata): the scan of
    # agentunit_gym/domains/ still finds the built-in domains.
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: [])
    registry.reload()
    try:
        assert {"os", "db"} <= set(registry.domain_names())
        assert registry.broken_domains() == ()
    finally:
        monkeypatch.undo()
        registry.reload()


def test_a_domain_clashing_with_a_registered_one_is_set_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.entry_points

    def entry_points(group: str) -> Any:
        return [*real(group=group), _EntryPoint("zz-copy", "agentunit_gym.domains.db:DOMAIN")]

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    registry.reload()
    try:
        broken = {b.name: b.reason for b in registry.broken_domains()}
        assert "already registered" in broken["zz-copy"]
        assert registry.get_domain("db").name == "db"
    finally:
        monkeypatch.undo()
        registry.reload()
