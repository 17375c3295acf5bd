"""The AgentBench OS loader, on items written in AgentBench's layout in a temp dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.domains.os.agentbench import load_agentbench_os
from agentunit_gym.errors import ConfigError, TaskFileError

INTEGER_MATCH = """import sys
sys.exit(0 if int(sys.argv[1].strip()) == int(sys.argv[2].strip()) else 1)
"""

DEV_ITEMS: list[dict[str, Any]] = [
    {"description": "How many lines does /root/app.log have that contain ERROR?",
     "create": {"local": "default",
                "init": {"code": "printf 'ok\\nERROR a\\nERROR b\\nok\\n' > /root/app.log"}},
     "evaluation": {"check": [None, {"file": "check/integer-match.py", "language": "python"}],
                    "example": {"code": "grep -c ERROR /root/app.log"}},
     "labels": ["file", "grep"]},
    {"description": "What is the name of the only file in /root/box?",
     "create": {"local": "default", "init": ["mkdir -p /root/box", {"code": "touch /root/box/gem.txt"}]},
     "evaluation": {"match": "gem.txt"}},
    {"description": "Malformed create: it is a list.",
     "create": [{"local": "default"}],
     "evaluation": {"match": {"regex": "^ok$", "strip": True}}},
]

TEST_ITEM = {
    "description": "Stop the process named worker; say finish.",
    "create": {"local": "packages", "init": {"file": "init/worker.sh"}},
    "start": "/root/worker 600 &\nfor i in $(seq 1 100); do pgrep -x worker > /dev/null && break; sleep 0.05; done",
    "evaluation": {"check": {"file": "check/no-worker.sh"}},
    "labels": ["process"],
}


def write_checkout(root: Path) -> Path:
    """An AgentBench data/ folder: dev.json (a list), data/3/Q7.json (one object), data/12/jl.json (JSON Lines)."""
    base = root / "data" / "os_interaction"
    (base / "data" / "3").mkdir(parents=True)
    (base / "data" / "12").mkdir(parents=True)
    (base / "data" / "dev.json").write_text(json.dumps(DEV_ITEMS))
    (base / "data" / "3" / "Q7.json").write_text(json.dumps(TEST_ITEM))
    lines = [{"description": f"Answer {n}.", "evaluation": {"match": str(n)}} for n in range(3)]
    (base / "data" / "12" / "jl.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (base / "scripts" / "dev" / "check").mkdir(parents=True)
    (base / "scripts" / "dev" / "check" / "integer-match.py").write_text(INTEGER_MATCH)
    (base / "scripts" / "3" / "init").mkdir(parents=True)
    (base / "scripts" / "3" / "check").mkdir(parents=True)
    (base / "scripts" / "3" / "init" / "worker.sh").write_text('cp "$(command -v sleep)" /root/worker\n')
    (base / "scripts" / "3" / "check" / "no-worker.sh").write_text("! pgrep -x worker > /dev/null\n")
    return root / "data"


def test_ids_order_and_fields(tmp_path: Path) -> None:
    tasks = load_agentbench_os(write_checkout(tmp_path))
    assert [t.id for t in tasks] == [
        "dev-001-dev-00000", "dev-001-dev-00001", "dev-001-dev-00002",
        "std-003-Q7-00000", "std-012-jl-00000", "std-012-jl-00001", "std-012-jl-00002",
    ]
    first, second, malformed, proc = tasks[:4]
    assert first.evaluation.check[0] is None  # type: ignore[index]
    assert first.evaluation.check[1].file == "check/integer-match.py"  # type: ignore[index,union-attr]
    assert first.scripts_base == str(tmp_path / "data" / "os_interaction" / "scripts" / "dev")
    assert first.category == "file" and first.labels == ("file", "grep")
    assert [s.code for s in second.init] == ["mkdir -p /root/box", "touch /root/box/gem.txt"]
    assert second.reference_solution[0].arguments == "gem.txt"
    assert malformed.init == () and malformed.image == "default"
    assert malformed.evaluation.match.regex == "^ok$"  # type: ignore[union-attr]
    assert proc.image == "packages" and proc.start.code.startswith("/root/worker 600 &\n")  # type: ignore[union-attr]
    assert proc.scripts_base.endswith("scripts/3")  # type: ignore[union-attr]
    assert proc.source == f"{tmp_path / 'data' / 'os_interaction' / 'data' / '3' / 'Q7.json'}#0"


def test_splits_and_other_entry_points(tmp_path: Path) -> None:
    data = write_checkout(tmp_path)
    assert [t.id for t in load_agentbench_os(data, splits=["dev"])][-1] == "dev-001-dev-00002"
    assert len(load_agentbench_os(data, splits=("test",))) == 4
    # The os_interaction folder itself works too.
    assert len(load_agentbench_os(data / "os_interaction")) == 7
    with pytest.raises(ConfigError, match="unknown AgentBench OS split"):
        load_agentbench_os(data, splits=("train",))
    with pytest.raises(TaskFileError, match="no AgentBench OS data here"):
        load_agentbench_os(tmp_path / "nowhere")


def test_a_bad_item_names_file_task_and_field(tmp_path: Path) -> None:
    data = write_checkout(tmp_path)
    bad = data / "os_interaction" / "data" / "3" / "Q8.json"
    bad.write_text(json.dumps([{"description": "x", "evaluation": {"match": "1"}},
                               {"description": "y", "evaluation": {"check": [None]}}]))
    with pytest.raises(TaskFileError) as caught:
        load_agentbench_os(data, splits=("test",))
    error = caught.value
    assert error.path == str(bad) and error.task_id == "std-003-Q8-00001" and error.field == "evaluation"
    assert "no example script" in str(error)


def _local_env(tasks: list[Any]) -> Any:
    from agentunit_gym.domains.os.env import OSEnv

    return OSEnv(backend="local", tasks=tasks)


def test_loaded_items_run_through_the_env_on_local(tmp_path: Path) -> None:
    tasks = load_agentbench_os(write_checkout(tmp_path))
    env = _local_env(tasks)
    try:
        # Check pipeline with a null entry (the example) and a file script.
        env.reset(options={"task_id": "dev-001-dev-00000"})
        obs, *_ = env.step("Think: count.\nAct: bash\n```bash\ngrep -c ERROR /root/app.log\n```")
        assert obs == "The output of the OS:\n\n2\n"
        assert env.step("Act: answer(2)")[1] == 1.0
        env.reset(options={"task_id": "dev-001-dev-00000"})
        assert env.step("Act: answer(3)")[1] == 0.0
        # A list of init scripts, then an exact match.
        env.reset(options={"task_id": "dev-001-dev-00001"})
        assert env.step("Act: answer(gem.txt)")[1] == 1.0
        # Init and check from the split's script folder, start script in the agent's shell.
        env.reset(options={"task_id": "std-003-Q7-00000"})
        assert env.step("Act: finish")[1] == 0.0  # the worker still runs
        env.reset(options={"task_id": "std-003-Q7-00000"})
        env.step("Act: bash\n```bash\npkill -x worker; sleep 0.3\n```")
        assert env.step("Act: finish")[1] == 1.0
    finally:
        env.close()
