"""The oracle replays AgentBench OS items as AgentBench grades them.

Check items have no literal answer: the loader gives them a reference that runs the item's
example script in the agent's shell, then answers with what it printed (when the check
compares the answer with the example's output) or finishes (when the checks inspect the
system). The items below are written in AgentBench's layout (invented, not AgentBench's)
and cover the check styles: example as ``code`` and as ``file``, bash and python examples,
answer-expected and operation-only, init lists and a start script.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.core.reference import PLACEHOLDER, OutputReply
from agentunit_gym.domains.os.agentbench import load_agentbench_os
from agentunit_gym.domains.os.env import OSEnv, shown_output
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.eval.agents.builtin import OracleAgent
from agentunit_gym.eval.run.runner import EvalConfig, run_episodes

INTEGER_MATCH = """import sys
def as_int(text):
    try:
        return int(text.strip())
    except ValueError:
        return None
sys.exit(0 if as_int(sys.argv[1]) is not None and as_int(sys.argv[1]) == as_int(sys.argv[2]) else 1)
"""
STRING_MATCH = """import sys
norm = lambda s: s.replace("\\r\\n", "\\n").strip()
sys.exit(0 if norm(sys.argv[1]) == norm(sys.argv[2]) else 1)
"""

INTEGER = {"language": "python", "file": "check/integer-match.py"}
STRING = {"language": "python", "file": "check/string-match.py"}

ITEMS: list[dict[str, Any]] = [
    # 0: answer expected, example as inline code, one init script.
    {"description": "How many lines of /root/app.log contain ERROR?",
     "create": {"local": "default",
                "init": {"code": "printf 'ok\\nERROR a\\nERROR b\\nok\\nERROR c\\n' > /root/app.log"}},
     "evaluation": {"check": [None, INTEGER], "example": {"code": "grep -c ERROR /root/app.log"}},
     "labels": ["file"]},
    # 1: answer expected, example in a file, a list of init scripts, a multi-line answer.
    {"description": "List the files in /root/box, one per line, sorted.",
     "create": {"local": "default", "init": ["mkdir -p /root/box", {"code": "touch /root/box/b.txt /root/box/a.md"}]},
     "evaluation": {"check": [None, STRING], "example": {"file": "example/list-box.sh"}},
     "labels": ["file"]},
    # 2: answer expected, a python example given as a bare-string-free object, a start script
    #    run in the agent's shell before the first turn.
    {"description": "How many entries does /root/spool hold?",
     "create": {"local": "default", "init": "mkdir -p /root/spool && touch /root/spool/1 /root/spool/2"},
     "start": "touch /root/spool/3 /root/spool/4",
     "evaluation": {"check": [None, INTEGER],
                    "example": {"language": "python", "code": "import os\nprint(len(os.listdir('/root/spool')))"}},
     "labels": ["file"]},
    # 3: operation only: the example (a file) makes the change, a check script verifies it.
    {"description": "Create the command /root/bin/greet that prints 'hello, <name>'.",
     "create": {"local": "default"},
     "evaluation": {"check": {"file": "check/greet.sh"}, "example": {"file": "example/greet.sh"}},
     "labels": ["command"]},
    # 4: operation only, the example is also the check ([null] alone), and it ends with exit.
    {"description": "Make the folder /root/out and put a file x holding 'hi' in it.",
     "evaluation": {"check": [None],
                    "example": "mkdir -p /root/out && echo hi > /root/out/x\ngrep -qx hi /root/out/x\nexit $?"},
     "labels": ["file"]},
    # 5: a match item still answers with its literal answer.
    {"description": "Say ok.", "evaluation": {"match": "ok"}},
]

GREET_EXAMPLE = """mkdir -p /root/bin
cat > /root/bin/greet <<'EOF'
#!/bin/bash
echo "hello, $1"
EOF
chmod +x /root/bin/greet
"""
GREET_CHECK = '[ "$(/root/bin/greet ann)" = "hello, ann" ] && [ "$(/root/bin/greet "bo b")" = "hello, bo b" ]\n'


def write_checkout(root: Path, items: list[dict[str, Any]] = ITEMS) -> Path:
    base = root / "data" / "os_interaction"
    (base / "data").mkdir(parents=True)
    (base / "data" / "dev.json").write_text(json.dumps(items))
    scripts = base / "scripts" / "dev"
    (scripts / "check").mkdir(parents=True)
    (scripts / "example").mkdir(parents=True)
    (scripts / "check" / "integer-match.py").write_text(INTEGER_MATCH)
    (scripts / "check" / "string-match.py").write_text(STRING_MATCH)
    (scripts / "check" / "greet.sh").write_text(GREET_CHECK)
    (scripts / "example" / "greet.sh").write_text(GREET_EXAMPLE)
    (scripts / "example" / "list-box.sh").write_text("ls -1 /root/box | sort\n")
    return root / "data"


def test_check_items_get_the_example_as_reference(tmp_path: Path) -> None:
    tasks = load_agentbench_os(write_checkout(tmp_path))
    steps = [[(s.tool, s.arguments, s.from_output) for s in t.reference_solution] for t in tasks]
    assert steps[0] == [("bash", "bash -c 'grep -c ERROR /root/app.log' < /dev/null", False),
                        ("answer", {}, True)]
    # The file's text is inlined: the reference runs where the script folder is not.
    assert steps[1] == [("bash", "bash -c 'ls -1 /root/box | sort\n' < /dev/null", False), ("answer", {}, True)]
    assert steps[2][0][1].startswith("python3 -c 'import os\n") and steps[2][1] == ("answer", {}, True)
    assert steps[3][0][1].startswith("bash -c 'mkdir -p /root/bin\ncat > /root/bin/greet <<'\"'\"'EOF'\"'\"'\n")
    assert steps[3][1] == ("finish", {}, False)
    assert steps[4][1] == ("finish", {}, False)
    assert steps[5] == [("answer", "ok", False)]
    assert [t.k_opt for t in tasks] == [2, 2, 2, 2, 2, 1]


def test_an_unreadable_example_names_the_item(tmp_path: Path) -> None:
    from agentunit_gym.errors import TaskFileError

    item = {"description": "x", "evaluation": {"check": [None, INTEGER], "example": {"file": "example/gone.sh"}}}
    with pytest.raises(TaskFileError, match="gone.sh"):
        load_agentbench_os(write_checkout(tmp_path, [item]))


def test_output_reply_completes_from_the_observation_and_pickles() -> None:
    task = OSTask.model_validate({"id": "t", "instruction": "i", "evaluation": {"match": "1"},
                                  "reference_solution": [{"tool": "answer", "from_output": True}]})
    env = OSEnv(backend="local", tasks=[task])
    try:
        react = env.render_action(task.reference_solution[0])
        as_json = env.render_action(task.reference_solution[0], "json")
    finally:
        env.close()
    assert isinstance(react, OutputReply) and PLACEHOLDER in react
    assert react.complete("The output of the OS:\n\n3\n") == "Think: I know the answer.\nAct: answer(3)"
    again = pickle.loads(pickle.dumps(react))
    assert isinstance(again, OutputReply) and again == react
    assert again.complete("The output of the OS is empty.").endswith("Act: answer()")
    assert isinstance(as_json, OutputReply)
    assert json.loads(as_json.complete('The output of the OS:\n\na "b"\nc)')) == {
        "name": "answer", "arguments": {"answer": 'a "b"\nc)'}}


def test_shown_output_drops_only_our_framing_and_notes() -> None:
    assert shown_output("The output of the OS:\n\n12\n") == "12"
    assert shown_output("The output of the OS:\n\na\nb\n\n") == "a\nb"
    assert shown_output("The output of the OS:\n\nx\n[exit code 1]") == "x"
    assert shown_output("The output of the OS:\n\nabc\n[output truncated: first 3 of 9 characters shown]"
                        "\n[exit code 2]") == "abc"
    # Text the command printed that merely looks like a note stays unless it ends the output.
    assert shown_output("The output of the OS:\n\n[exit code 1]\nmore") == "[exit code 1]\nmore"
    assert shown_output("The output of the OS is empty.") == ""
    assert shown_output("something else") == ""


def test_from_output_steps_refuse_arguments() -> None:
    from pydantic import ValidationError

    from agentunit_gym.tasks.spec import ReferenceStep

    with pytest.raises(ValidationError, match="give no arguments"):
        ReferenceStep(tool="answer", arguments={"answer": "3"}, from_output=True)


def _oracle_run(tasks: list[OSTask], backend: str, run_dir: Path) -> dict[str, tuple[float, str]]:
    config = EvalConfig(envs=("AgentUnit/OS-v0",), backends=(backend,), agent="oracle", concurrency=1,
                        env_options={"tasks": tasks})
    outcome = run_episodes(config, OracleAgent, "oracle", run_dir)
    return {r.task_id: (r.reward, str(r.finish_reason)) for r in outcome.records}


def _wrong_answers_fail(tasks: list[OSTask], backend: str) -> None:
    """The same items fail for a wrong answer or a finish without the change: the grading is real."""
    env = OSEnv(backend=backend, tasks=tasks)
    try:
        env.reset(options={"task_id": tasks[0].id})
        assert env.step("Act: answer(2)")[1] == 0.0  # three ERROR lines, not two
        env.reset(options={"task_id": tasks[3].id})
        assert env.step("Act: finish")[1] == 0.0  # greet was never made
        env.reset(options={"task_id": tasks[2].id})
        assert env.step("Act: answer(2)")[1] == 0.0  # the start script added two entries
    finally:
        env.close()


def _check_backend(tmp_path: Path, backend: str) -> None:
    tasks = load_agentbench_os(write_checkout(tmp_path))
    results = _oracle_run(tasks, backend, tmp_path / "run")
    assert results == {t.id: (1.0, "complete") for t in tasks}, results
    _wrong_answers_fail(tasks, backend)


def test_the_oracle_passes_every_style_on_local(tmp_path: Path) -> None:
    _check_backend(tmp_path, "local")


@pytest.mark.docker
def test_the_oracle_passes_every_style_on_docker(tmp_path: Path) -> None:
    _check_backend(tmp_path, "docker")


def test_the_cli_oracle_passes_an_agentbench_checkout_past_a_bad_item(tmp_path: Path) -> None:
    """``eval --agent oracle --tasks <data/>`` as a user runs it: every good item passes, the
    item that does not convert is reported once and the run goes on."""
    import subprocess
    import sys

    bad = {"description": "A null check entry without an example.", "evaluation": {"check": [None]}}
    data = write_checkout(tmp_path, [*ITEMS, bad])
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agentunit_gym", "eval", "--env", "OS-v0", "--agent", "oracle", "--tasks", str(data),
         "--backend", "local", "--output", str(run), "--quiet"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["reward"]) for r in records) == [
        (f"dev-001-dev-{i:05d}", 1.0) for i in range(len(ITEMS))]
    output = done.stdout + done.stderr
    assert output.count("dev-001-dev-00006") == 1, output
    assert "no example script" in output


# Shaped as AgentBench's std-004-Q47-00000 (our own text): an operation whose question also
# asks for an answer, graded by check scripts only (no null entry), the first of which reads
# the answer (its first argument) itself.
READS_ANSWER: dict[str, Any] = {
    "description": "Move /root/src/app.ini into the current folder, and tell me where it was before.",
    "create": {"local": "default", "init": "mkdir -p /root/src && echo 'x=1' > /root/src/app.ini"},
    "start": "mkdir -p /root/dst && cd /root/dst",
    "evaluation": {"check": [{"language": "python",
                              "code": "from sys import argv\nassert argv[1].strip() == '/root/src/app.ini'"},
                             {"language": "bash", "code": "test ! -e /root/src/app.ini && test -e /root/dst/app.ini"}],
                   "example": {"code": "mv /root/src/app.ini /root/dst/ && echo /root/src/app.ini"}},
}


def test_a_check_that_reads_the_answer_gets_the_example_output_as_answer(tmp_path: Path) -> None:
    bash_reads = {**READS_ANSWER, "evaluation": {**READS_ANSWER["evaluation"], "check": [
        {"code": '[ "$1" = /root/src/app.ini ]'}, READS_ANSWER["evaluation"]["check"][1]]}}
    awk_only = {**READS_ANSWER, "evaluation": {**READS_ANSWER["evaluation"], "check": [
        {"code": "ls -l /root/dst/app.ini | awk '{print $9}'"}]}}
    tasks = load_agentbench_os(write_checkout(tmp_path, [READS_ANSWER, bash_reads, awk_only]))
    tools = [[(s.tool, s.from_output) for s in t.reference_solution] for t in tasks]
    assert tools[0] == tools[1] == [("bash", False), ("answer", True)]
    assert tools[2] == [("bash", False), ("finish", False)]  # no script reads the answer
    results = _oracle_run(tasks[:1], "local", tmp_path / "run")
    assert results == {tasks[0].id: (1.0, "complete")}
    # As AgentBench grades it, a finish (no answer) fails it: the oracle used to finish here.
    env = OSEnv(backend="local", tasks=tasks[:1])
    try:
        env.reset(options={"task_id": tasks[0].id})
        env.step(env.render_action(tasks[0].reference_solution[0]))
        assert env.step("Act: finish")[1] == 0.0
    finally:
        env.close()
