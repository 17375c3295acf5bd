"""``agentunit-gym tasks``: list, show, validate, schema, through cli.main.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentunit_gym.cli.main import main
from agentunit_gym.core.registry import domain_names, find_task, get_domain
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import ConfigError, TaskNotFoundError
from agentunit_gym.tasks.spec import TaskSpec


def bundled_tasks(domain: str) -> list[TaskSpec]:
    return get_domain(domain).bundled_tasks()


def test_list_filters_by_domain_and_category(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "--domain", "os", "--category", "processes"]) == 0
    out = capsys.readouterr().out
    expected = [t.id for t in bundled_tasks("os") if t.category == "processes"]
    assert len(expected) >= 5
    for task_id in expected:
        assert task_id in out
    assert "os-files-largest" not in out
    assert f"{len(expected)} task(s)" in out


def test_list_shows_backends(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "--domain", "os"]) == 0
    out = capsys.readouterr().out
    cells = {line.split("│")[1].strip(): line.split("│")[4].strip() for line in out.splitlines() if line.count("│") > 5}
    assert cells["os-perms-owner"] == "docker (switches users)"
    assert cells["os-perms-setuid"] == "docker"
    assert cells["os-users-group-member"] == "all"


def test_show_prints_the_task_as_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "os-text-nth-line"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# domain: os\n")
    data = yaml.safe_load(out)
    again = OSTask.model_validate(data)
    assert again == find_task("os-text-nth-line")[1]
    assert data["evaluation"]["match"]["answer"] == "item-037-6"


def test_show_unknown_id_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "os-no-such-task", "--domain", "os"]) == 2
    assert "no bundled task 'os-no-such-task'" in capsys.readouterr().err


def test_validate_good_and_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"tasks": [{"id": "g1", "instruction": "Say 1.", "evaluation": {"match": "1"},
                                               "reference_solution": [{"answer": "1"}]}]}))
    assert main(["tasks", "validate", str(good)]) == 0
    assert f"ok: {good} (1 task(s))" in capsys.readouterr().out

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump([{"id": "b1", "instruction": "x", "evaluation": {"match": "1"}},
                                   {"id": "b2", "instruction": "y", "evaluation": {"match": "1"},
                                    "image": "fedora"}]))
    assert main(["tasks", "validate", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"ok: {good}" in captured.out
    assert f"{bad}, task 'b2', field 'image'" in captured.err


def test_validate_the_bundled_suite_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "validate", str(get_domain("os").suite)]) == 0
    assert f"({len(bundled_tasks('os'))} task(s))" in capsys.readouterr().out


def test_schema_is_the_models_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "schema", "--domain", "os"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == OSTask.model_json_schema()
    assert "evaluation" in schema["required"] and "Script" in schema["$defs"]


def test_domain_table() -> None:
    assert get_domain("os").task_model is OSTask
    assert set(domain_names()) >= {"os", "db"}
    with pytest.raises(ConfigError, match="unknown domain"):
        get_domain("kg2")
    with pytest.raises(TaskNotFoundError):
        find_task("nope", "os")
    assert main(["tasks", "schema", "--domain", "kg2"]) == 2
