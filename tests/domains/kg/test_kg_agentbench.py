"""AgentBench's KG item format (dev.json / std.json) against a small graph built with Freebase ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentunit_gym.backends.sparql.embedded import EmbeddedSPARQL
from agentunit_gym.core import FinishReason
from agentunit_gym.domains.kg.agentbench import load_agentbench_kg, looks_like_agentbench_kg
from agentunit_gym.domains.kg.env import KGEnv
from agentunit_gym.errors import TaskFileError

# Invented items in AgentBench's format, about the graph in graphs.freebase_graph().
ITEMS = [
    {
        "question": "the bipropellant rocket engine with kerosene and gas-generator cycle is designed by who?",
        "qid": "0001_invented", "source": "invented",
        "entities": {"Gas-generator cycle": "m.0gas", "Kerosene": "m.0ker"},
        "s_expression": "(AND spaceflight.rocket_engine_designer (JOIN (R spaceflight.rocket_engine.designed_by) "
                        "(AND (JOIN (R spaceflight.rocket_engine_cycle.rocket_engines) m.0gas) "
                        "(JOIN (R spaceflight.rocket_engine_cycle.rocket_engines) m.0ker))))",
        "actions": ["get_relations(m.0gas)", "get_neighbors(m.0gas,spaceflight.rocket_engine_cycle.rocket_engines)",
                    "get_relations(m.0ker)", "get_neighbors(m.0ker,spaceflight.rocket_engine_cycle.rocket_engines)",
                    "intersection(#0,#1)", "get_relations(#2)",
                    "get_neighbors(#2,spaceflight.rocket_engine.designed_by)"],
        "answer": [{"answer_type": "Entity", "answer_argument": "m.0d2", "entity_name": "Designer Two"}],
    },
    {
        "question": "how many engines with the gas-generator cycle are there?",
        "qid": "0002_invented", "source": "invented",
        "entities": {"Gas-generator cycle": "m.0gas"},
        "s_expression": "(COUNT (JOIN (R spaceflight.rocket_engine_cycle.rocket_engines) m.0gas))",
        "actions": ["get_relations(m.0gas)", "get_neighbors(m.0gas,spaceflight.rocket_engine_cycle.rocket_engines)",
                    "count(#0)"],
        "answer": [{"answer_type": "Value", "answer_argument": "2"}],
    },
    {
        "question": "which kerosene engine has the most thrust?",
        "qid": "0003_invented", "source": "invented",
        "entities": {"Kerosene": "m.0ker"},
        "s_expression": "(ARGMAX (JOIN (R spaceflight.rocket_engine_cycle.rocket_engines) m.0ker) "
                        "spaceflight.rocket_engine.thrust)",
        "actions": ["get_relations(m.0ker)", "get_neighbors(m.0ker,spaceflight.rocket_engine_cycle.rocket_engines)",
                    "get_attributes(#0)", "argmax(#0,spaceflight.rocket_engine.thrust)"],
        "answer": [{"answer_type": "Entity", "answer_argument": "m.0e2", "entity_name": "Engine Two"}],
    },
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data" / "knowledgegraph"
    folder.mkdir(parents=True)
    (folder / "dev.json").write_text(json.dumps(ITEMS[:2], indent=4), encoding="utf-8")
    (folder / "std.json").write_text(json.dumps(ITEMS[2:], indent=4), encoding="utf-8")
    return tmp_path / "data"


def test_loader_reads_both_splits_with_stable_ids(data_dir: Path) -> None:
    tasks = load_agentbench_kg(data_dir)
    assert [t.id for t in tasks] == ["dev-00000", "dev-00001", "std-00000"]
    first = tasks[0]
    assert first.instruction == ITEMS[0]["question"] and first.entities == ITEMS[0]["entities"]
    assert first.answer == ("m.0d2",) and first.answer_names == ("Designer Two",)
    assert first.graph == "freebase" and first.category == "intersection" and first.labels == ("invented",)
    assert first.reference_solution[1].arguments == {
        "variable": "m.0gas", "relation": "spaceflight.rocket_engine_cycle.rocket_engines"}
    assert first.reference_solution[-1].arguments == {"variable": "#3"}
    assert tasks[1].answer == ("2",) and tasks[1].category == "count"
    assert looks_like_agentbench_kg(data_dir / "knowledgegraph" / "dev.json")
    assert load_agentbench_kg(data_dir / "knowledgegraph" / "std.json")[0].id == "std-00000"


def test_oracle_answers_agentbench_items_on_a_freebase_graph(data_dir: Path, freebase_store: EmbeddedSPARQL) -> None:
    path = data_dir / "knowledgegraph" / "dev.json"
    with KGEnv(sparql_backend=freebase_store, tasks=str(path)) as env:
        assert env.graph == "freebase" and [t.id for t in env.tasks] == ["dev-00000", "dev-00001"]
        for task in env.tasks:
            env.reset(options={"task_id": task.id})
            info: dict[str, object] = {}
            for step in task.reference_solution:
                _, _, _, _, info = env.step(env.render_action(step))
            assert info["finish_reason"] is FinishReason.COMPLETE
            score = info["score"]
            assert isinstance(score, dict) and score["reward"] == 1.0, (task.id, score)
    # Relations and their ranges come from the store's schema (type.property.expected_type).
    with KGEnv(sparql_backend=freebase_store, tasks=load_agentbench_kg(data_dir)) as env:
        env.reset(options={"task_id": "std-00000"})
        observation, *_ = env.step("Action: get_relations(Kerosene)")
        assert observation == "Observation: [spaceflight.rocket_engine_cycle.rocket_engines]"
        observation, *_ = env.step("Action: get_neighbors(Kerosene, spaceflight.rocket_engine_cycle.rocket_engines)")
        assert observation == "Observation: variable #0, which are instances of spaceflight.bipropellant_rocket_engine"
        observation, *_ = env.step("Action: get_attributes(#0)")
        assert observation == "Observation: [spaceflight.rocket_engine.thrust]"


def test_the_bundled_env_does_not_run_freebase_items(data_dir: Path, small_store: EmbeddedSPARQL) -> None:
    from agentunit_gym.errors import ConfigError

    with KGEnv(sparql_backend=small_store, tasks=load_agentbench_kg(data_dir), graph="bundled") as env:
        assert env.tasks == []
        with pytest.raises(ConfigError):
            env.reset(options={"task_id": "dev-00000"})


def test_bad_files_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "dev.json"
    bad.write_text(json.dumps([{**ITEMS[0], "answer": []}]), encoding="utf-8")
    with pytest.raises(TaskFileError, match="answer"):
        load_agentbench_kg(bad)
    bad.write_text(json.dumps([{**ITEMS[0], "actions": ["fly(m.0gas)"]}]), encoding="utf-8")
    with pytest.raises(TaskFileError, match="unknown tool"):
        load_agentbench_kg(bad)
    with pytest.raises(TaskFileError):
        load_agentbench_kg(tmp_path / "missing")


def test_freebase_items_without_an_endpoint_stop_with_the_fix(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They used to run on the bundled geography graph and score 0 each, as if the agent had failed."""
    from agentunit_gym.cli.main import main
    from agentunit_gym.errors import BackendUnavailableError, EndpointRequiredError

    monkeypatch.delenv("AGENTUNIT_KG_ENDPOINT", raising=False)
    for backend in ("auto", "embedded", "sparql"):
        with pytest.raises(BackendUnavailableError, match="AGENTUNIT_KG_ENDPOINT=http"):
            KGEnv(backend=backend, tasks=load_agentbench_kg(data_dir))
    with pytest.raises(EndpointRequiredError):
        KGEnv(tasks=load_agentbench_kg(data_dir), graph="freebase")
    output = tmp_path / "run"
    code = main(["eval", "--env", "KG-v0", "--tasks", str(data_dir / "knowledgegraph"), "--output", str(output)])
    assert code == 2
    err = capsys.readouterr().err
    assert "no Freebase SPARQL endpoint was given" in err and "AGENTUNIT_KG_ENDPOINT" in err
    assert "--env-option KG-v0:endpoint=http://HOST:PORT/sparql" in err
    assert not (output / "episodes.jsonl").exists()
    # Given with --env-option, the endpoint reaches the env: the error is now about that server.
    code = main(["eval", "--env", "KG-v0", "--tasks", str(data_dir / "knowledgegraph"), "--output",
                 str(tmp_path / "run2"), "--env-option", "KG-v0:endpoint=http://127.0.0.1:9/sparql"])
    err = capsys.readouterr().err
    assert "no Freebase SPARQL endpoint was given" not in err and "127.0.0.1:9" in err, err


CHECKOUT = Path(__file__).resolve().parents[2] / "fixtures" / "agentbench_checkout"


def test_agentbench_ontology_filters_relations_and_attributes(tmp_path: Path, freebase_store: EmbeddedSPARQL) -> None:
    """The stand-in checkout's ontology lists rocket_engines (with a range of its own) and
    thrust, not designed_by: given it, the env lists what AgentBench would; without it, the store's."""
    import shutil

    from agentunit_gym.errors import AgentBenchCheckoutError

    checkout = tmp_path / "AgentBench"
    shutil.copytree(CHECKOUT, checkout)
    data = checkout / "data" / "knowledgegraph"
    data.mkdir(parents=True)
    (data / "dev.json").write_text(json.dumps(ITEMS), encoding="utf-8")
    calls = ["Action: get_relations(Gas-generator cycle)",
             "Action: get_neighbors(Gas-generator cycle, spaceflight.rocket_engine_cycle.rocket_engines)",
             "Action: get_relations(#0)", "Action: get_attributes(#0)"]

    def observe(**options: object) -> list[str]:
        with KGEnv(sparql_backend=freebase_store, **options) as env:  # type: ignore[arg-type]
            env.reset(options={"task_id": "dev-00000"})
            return [str(env.step(call)[0]) for call in calls]

    # Found from the tasks' path: the file lies in the checkout.
    found = observe(tasks=str(data / "dev.json"))
    assert found == ["Observation: [spaceflight.rocket_engine_cycle.rocket_engines]",
                     "Observation: variable #0, which are instances of standin.engine_type",
                     "Observation: []",  # designed_by is not in the ontology
                     "Observation: [spaceflight.rocket_engine.thrust]"]
    assert observe(tasks=load_agentbench_kg(data), ontology=checkout) == found
    assert observe(tasks=load_agentbench_kg(data),
                   ontology=checkout / "src/server/tasks/knowledgegraph/ontology") == found
    # Without the ontology: the store's relations and ranges.
    assert observe(tasks=str(data / "dev.json"), ontology=False) == [
        "Observation: [spaceflight.rocket_engine_cycle.rocket_engines]",
        "Observation: variable #0, which are instances of spaceflight.bipropellant_rocket_engine",
        "Observation: [spaceflight.rocket_engine.designed_by]",
        "Observation: [spaceflight.rocket_engine.thrust]"]
    with pytest.raises(AgentBenchCheckoutError, match="ontology=.*vocab.json"):
        KGEnv(sparql_backend=freebase_store, tasks=load_agentbench_kg(data), ontology=tmp_path / "nowhere")
