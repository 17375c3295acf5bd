"""OSEnv unit tests on a small fake sandbox (no isolation: it runs commands in a temp dir).

The fake really executes bash and python, so the check-pipeline semantics and the built-in
check helpers are exercised for real; the real sandboxes are covered by tests/tasks/test_os_suite.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import agentunit_gym  # noqa: F401 - registers the ids
from agentunit_gym.backends.sandbox.base import ExecResult, Language, Sandbox
from agentunit_gym.backends.sandbox.local import LocalSandbox
from agentunit_gym.core import ActionError, FinishReason
from agentunit_gym.domains.os.checks import CHECK_HELPERS
from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import BackendError, ConfigError, EpisodeStateError


class FakeSandbox(Sandbox):
    """Runs commands with bash/python in a temp dir; ``scripted`` results replace shell runs."""

    kind: ClassVar[str] = "fake"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shell_calls: list[str] = []
        self.run_calls: list[tuple[str, str, tuple[str, ...]]] = []
        self.scripted: list[ExecResult] = []
        self.resets = self.starts = self.closes = 0

    def _exec(self, argv: list[str], timeout: float, max_output: int) -> ExecResult:
        started = time.perf_counter()
        try:
            done = subprocess.run(argv, cwd=self.root, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return ExecResult("", None, timed_out=True, duration_s=timeout)
        data = done.stdout + done.stderr
        return ExecResult(data[:max_output].decode("utf-8", "replace"), done.returncode,
                          truncated=len(data) > max_output, output_bytes=len(data),
                          duration_s=time.perf_counter() - started)

    def start(self) -> None:
        self.starts += 1

    def run(self, command: str, *, timeout: float = 30.0, language: Language = "bash",
            args: tuple[str, ...] = (), max_output: int = 1 << 20) -> ExecResult:
        self.run_calls.append((command, language, args))
        argv = ["bash", "-c", command, "bash", *args] if language == "bash" else [sys.executable, "-c", command, *args]
        return self._exec(argv, timeout, max_output)

    def shell(self, command: str, *, timeout: float = 30.0, max_output: int = 1 << 20) -> ExecResult:
        self.shell_calls.append(command)
        if self.scripted:
            return self.scripted.pop(0)
        return self._exec(["bash", "-c", command], timeout, max_output)

    def read_file(self, path: str, *, max_bytes: int = 1 << 24) -> bytes:
        return (self.root / path).read_bytes()[:max_bytes]

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        (self.root / path).write_bytes(data)

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closes += 1


def _task(**fields: Any) -> OSTask:
    base: dict[str, Any] = {"id": "t", "instruction": "Do it.", "evaluation": {"match": "3"}}
    base.update(fields)
    return OSTask.model_validate(base)


COUNT = _task(
    id="count", instruction="How many lines are in data.txt?",
    init=["printf 'a\\nb\\nc\\n' > data.txt"],
    evaluation={"check": [None, {"builtin": "integer-match"}], "example": "wc -l < data.txt"},
    reference_solution=[{"bash": "wc -l < data.txt"}, {"answer": "3"}],
)
EXACT = _task(id="exact", evaluation={"match": {"answer": "  blue  "}})
REGEX = _task(id="regex", evaluation={"match": {"regex": r"^v?2\.0$"}})
STATE = _task(
    id="state", instruction="Create done.flag.",
    evaluation={"check": ["test -f done.flag"]},
    reference_solution=[{"bash": "touch done.flag"}, {"finish": None}],
)


@pytest.fixture()
def sandbox(tmp_path: Path) -> FakeSandbox:
    return FakeSandbox(tmp_path)


def make_env(sandbox: FakeSandbox, tasks: list[OSTask] | None = None, **kwargs: Any) -> OSEnv:
    return OSEnv(sandbox=sandbox, tasks=tasks or [COUNT, EXACT, REGEX, STATE], **kwargs)


# ------------------------------------------------------------------ parsing


def test_parse_bash_block_and_thought(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    action = env.parse_action("Think: count them.\n\nAct: bash\n\n```bash\nls -l\nwc -l < x\n```\n")
    assert action.tool == "bash" and action.arguments == {"script": "ls -l\nwc -l < x"}  # type: ignore[union-attr]
    assert action.thought == "count them."  # type: ignore[union-attr]


def test_last_act_wins(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    text = "Think: a\nAct: bash\n```bash\necho 1\n```\nOn second thought:\nAct: answer(42)"
    action = env.parse_action(text)
    assert action.tool == "answer" and action.arguments == {"answer": "42"}  # type: ignore[union-attr]
    text2 = "Act: answer(1)\nAct: bash\n```bash\necho hi\n```"
    assert env.parse_action(text2).arguments == {"script": "echo hi"}  # type: ignore[union-attr]


def test_answer_keeps_inner_parentheses(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    action = env.parse_action("Think: x\nAct: answer(f(x) = (3))\nThat is all (really).")
    assert action.arguments == {"answer": "f(x) = (3)"}  # type: ignore[union-attr]
    assert env.parse_action("Act: finish").tool == "finish"  # type: ignore[union-attr]


@pytest.mark.parametrize(("reply", "reason", "issue"), [
    ("I think the answer is 3.", FinishReason.INVALID_FORMAT, "no_call"),
    ("Think: run\nAct: bash\nls -l", FinishReason.INVALID_FORMAT, "malformed"),
    ("Think: run\nAct: bash\n```bash\nls -l\n", FinishReason.INVALID_FORMAT, "malformed"),
    ("Act: answer 3", FinishReason.INVALID_FORMAT, "malformed"),
    ("Act: answer(3", FinishReason.INVALID_FORMAT, "malformed"),
    ("Act: python\n```python\nprint(1)\n```", FinishReason.INVALID_ACTION, "unknown_tool"),
])
def test_invalid_replies_are_classified(sandbox: FakeSandbox, reply: str, reason: FinishReason, issue: str) -> None:
    env = make_env(sandbox)
    error = env.parse_action(reply)
    assert error.reason is reason and error.issue.value == issue  # type: ignore[union-attr]


def test_unknown_keyword_gets_a_hint_and_is_an_observation(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "count"})
    obs, reward, term, trunc, info = env.step("Think: x\nAct: bsh\n```bash\nls\n```")
    assert not term and reward == 0.0
    assert info["action_error"]["issue"] == "unknown_tool" and info["action_error"]["tool"] == "bsh"
    assert "Did you mean 'bash'?" in obs and obs.startswith("Invalid action")
    assert sandbox.shell_calls == []  # nothing ran


def test_terminate_policy_ends_with_if(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox, invalid_action="terminate")
    env.reset(options={"task_id": "count"})
    _, reward, term, _, info = env.step("no action here")
    assert term and reward == 0.0 and info["finish_reason"] is FinishReason.INVALID_FORMAT


# -------------------------------------------------------------- observations


def test_output_is_cut_with_a_marker(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox, observation_limit=50)
    env.reset(options={"task_id": "count"})
    obs, _, _, _, info = env.step("Act: bash\n```bash\nseq 1 1000\n```")
    body = obs.split("\n\n", 1)[1]
    assert body.startswith("1\n2\n3\n")
    assert "[output truncated: first 50 of 3893 characters shown]" in obs
    assert info["execution"]["truncated"] is True and info["execution"]["exit_code"] == 0
    assert info["execution_error"] is False
    # Output beyond what the sandbox keeps: the marker gives the byte count of all of it.
    sandbox.scripted.append(ExecResult("x" * 200, 0, truncated=True, output_bytes=10_000_000))
    obs, *_ = env.step("Act: bash\n```bash\nyes x\n```")
    marker = "[output truncated: first 50 characters of 10000000 bytes shown]"
    assert obs == "The output of the OS:\n\n" + "x" * 50 + "\n" + marker


def test_exit_code_timeout_and_empty_output(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox, command_timeout=2.5)
    env.reset(options={"task_id": "count"})
    obs, *_, info = env.step("Act: bash\n```bash\nls /no/such/dir\n```")
    assert "No such file or directory" in obs and obs.rstrip().endswith("[exit code 2]")
    assert info["execution_error"] is True
    obs, *_ = env.step("Act: bash\n```bash\ntrue\n```")
    assert obs == "The output of the OS is empty."
    sandbox.scripted.append(ExecResult("partial", None, timed_out=True, output_bytes=7))
    obs, *_, info = env.step("Act: bash\n```bash\nsleep 100\n```")
    assert obs == "The output of the OS:\n\npartial\n[command timed out after 2.5 s and was stopped]"
    # No exit code: left out of info rather than None (an int next to None does not batch).
    assert info["execution"]["timed_out"] is True and "exit_code" not in info["execution"]


def test_prompt_states_grammar_and_task(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    prompt, info = env.reset(options={"task_id": "count"})
    assert "Act: bash" in prompt and "Act: answer(" in prompt and "Act: finish" in prompt
    assert '{"name": "bash", "arguments": {"script": "YOUR COMMANDS"}}' in prompt  # the JSON form too
    assert prompt.endswith("Task: How many lines are in data.txt?")
    assert info["max_steps"] == 8 and info["optimal_steps"] == 2 and info["backend"] == "fake"
    assert [t["function"]["name"] for t in info["tools"]] == ["bash", "answer", "finish"]


# ------------------------------------------------------------------- scoring


def test_check_pipeline_right_and_wrong(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "count"})
    assert (sandbox.root / "data.txt").read_text() == "a\nb\nc\n"  # init ran
    _, reward, term, _, info = env.step("Act: answer( 3 )")
    assert term and reward == 1.0 and info["score"]["components"]["checks_passed"] == 2
    # The pipeline: example with params [answer], then the helper with [answer, example output].
    # The example ran in the sandbox with params [answer]; the built-in helper ran in-process.
    assert sandbox.run_calls[-1] == ("wc -l < data.txt", "bash", (" 3 ",))
    env.reset(options={"task_id": "count"})
    _, reward, _, _, info = env.step("Act: answer(4)")
    assert reward == 0.0 and info["score"]["detail"] == "check script 2 failed (exit code 1)"


def test_match_exact_and_regex(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "exact"})
    assert env.step("Act: answer(blue )")[1] == 1.0
    env.reset(options={"task_id": "exact"})
    assert env.step("Act: answer(Blue)")[1] == 0.0
    env.reset(options={"task_id": "regex"})
    assert env.step("Act: answer(v2.0)")[1] == 1.0
    env.reset(options={"task_id": "regex"})
    assert env.step("Act: answer(2.01)")[1] == 0.0
    env.reset(options={"task_id": "exact"})
    _, reward, term, _, info = env.step("Act: finish")
    assert term and reward == 0.0 and "expects answer" in info["score"]["detail"]


def test_state_task_finish_runs_the_check(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "state"})
    assert env.step("Act: finish")[1] == 0.0  # nothing done
    env.reset(options={"task_id": "state"})
    (sandbox.root / "done.flag").unlink(missing_ok=True)
    env.step("Act: bash\n```bash\ntouch done.flag\n```")
    _, reward, _, _, info = env.step("Act: finish")
    assert reward == 1.0 and info["finish_reason"] is FinishReason.COMPLETE
    assert sandbox.run_calls[-1] == ("test -f done.flag", "bash", ("",))


def test_step_limit_without_commit_scores_zero_even_if_state_is_right(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox, max_steps=1)
    env.reset(options={"task_id": "state"})
    _, reward, term, trunc, info = env.step("Act: bash\n```bash\ntouch done.flag\n```")
    assert trunc and not term and reward == 0.0
    assert info["finish_reason"] is FinishReason.TASK_LIMIT
    assert info["score"]["components"]["state_correct"] is True


def test_json_tool_calls(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "count"})
    obs, *_ = env.step(json.dumps({"name": "bash", "arguments": {"script": "wc -l < data.txt"}}))
    assert obs == "The output of the OS:\n\n3\n"
    _, reward, term, _, _ = env.step('{"name": "answer", "arguments": {"answer": "3"}}')
    assert term and reward == 1.0


def test_script_files_resolve_against_script_dir(sandbox: FakeSandbox, tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    (scripts / "check").mkdir(parents=True)
    same = "import sys\nsys.exit(0 if sys.argv[1].strip() == sys.argv[2].strip() else 1)\n"
    (scripts / "check" / "same.py").write_text(same)
    (scripts / "example.sh").write_text("echo hello-$((40 + 2))\n")
    task = _task(id="files", script_dir=str(scripts), evaluation={
        "check": [None, {"file": "check/same.py", "language": "python"}],
        "example": {"file": "example.sh"}})
    env = make_env(sandbox, [task])
    env.reset(options={"task_id": "files"})
    assert env.step("Act: answer(hello-42)")[1] == 1.0
    env.reset(options={"task_id": "files"})
    assert env.step("Act: answer(hello-41)")[1] == 0.0


@pytest.mark.parametrize(("name", "answer", "reference", "ok"), [
    ("integer-match", " 12 ", "12\n", True),
    ("integer-match", "12.0", "12", False),
    ("integer-match", "twelve", "12", False),
    ("string-match", "a\r\nb ", "a\nb\n", True),
    ("string-match", "a b", "a\nb", False),
    ("size-match", "2K", "2048", True),
    ("size-match", "1.5M", "1572864\n", True),
    ("size-match", "3G", "3072M", True),
    ("size-match", "1000", "1K", False),
    ("size-match", "big", "1K", False),
    ("contains", "alpha", "the alpha team", True),
    ("contains", "the alpha team\n", "alpha", True),
    ("contains", "beta", "alpha", False),
    ("contains", "", "alpha", False),
])
def test_builtin_check_helpers(name: str, answer: str, reference: str, ok: bool) -> None:
    # The script form (what a sandbox would run) and the function form (what the env runs) agree.
    helper = CHECK_HELPERS[name]
    done = subprocess.run([sys.executable, "-c", helper.source, answer, reference], check=False, timeout=30)
    assert (done.returncode == 0) is ok
    assert helper.matches(answer, reference) is ok


# ----------------------------------------------------------- episode set-up


def test_failing_init_raises_backend_error_naming_the_task(sandbox: FakeSandbox) -> None:
    bad = _task(id="broken-init", init=["true", "echo oops; exit 3"])
    env = make_env(sandbox, [bad])
    with pytest.raises(BackendError, match=r"task 'broken-init': init script 2 of 2 failed \(exit code 3\).*oops"):
        env.reset(options={"task_id": "broken-init"})


def test_a_made_env_goes_on_after_a_first_reset_that_failed(sandbox: FakeSandbox) -> None:
    # gymnasium's passive env checker, when on, broke the first step after a first reset that
    # raised (TypeError: it compares that step with the reset's missing result): an eval
    # reusing the env copy after a failed init crashed. Registered envs have it off; the envs
    # pass check_env in these tests instead.
    bad = _task(id="broken-init", init=["exit 3"])
    env = gym.make("AgentUnit/OS-v0", sandbox=sandbox, tasks=[bad, COUNT])
    with pytest.raises(BackendError, match="broken-init"):
        env.reset(options={"task_id": "broken-init"})
    env.reset(options={"task_id": "count"})
    _, _, terminated, truncated, _ = env.step("```bash\nls\n```")
    assert not (terminated or truncated)
    env.close()


def test_start_script_runs_in_the_agent_shell(sandbox: FakeSandbox) -> None:
    task = _task(id="started", start="export STAGE=canary", init=["echo init > init.txt"])
    env = make_env(sandbox, [task])
    env.reset(options={"task_id": "started"})
    assert sandbox.shell_calls == ["export STAGE=canary"]
    assert sandbox.run_calls == [("echo init > init.txt", "bash", ())]


def test_given_sandbox_is_reset_each_episode_and_not_closed(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    env.reset(options={"task_id": "exact"})
    env.reset(options={"task_id": "exact"})
    assert sandbox.resets == 2
    env.close()
    assert sandbox.closes == 0


def test_warm_up_starts_the_sandbox_that_the_first_episode_then_uses() -> None:
    env = OSEnv(backend="local", tasks=[EXACT])
    try:
        sandbox = env.sandbox
        assert isinstance(sandbox, LocalSandbox)
        assert sandbox.box_info() is None
        env.warm_up()
        warmed = sandbox.box_info()
        assert warmed is not None and warmed.shell_pid is not None
        shell = warmed.shell_pid

        def shell_now() -> int | None:
            info = sandbox.box_info()
            return info.shell_pid if info is not None else None

        env.reset(options={"task_id": "exact"})
        assert shell_now() == shell  # fresh: no reset needed
        env.warm_up()  # after an episode: nothing to do; the next reset resets the box
        assert shell_now() == shell
        env.reset(options={"task_id": "exact"})
        assert shell_now() != shell
    finally:
        env.close()


def test_warm_up_leaves_a_given_sandbox_alone(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)  # a caller's sandbox may hold anything: every episode resets it
    env.warm_up()
    env.reset(options={"task_id": "exact"})
    assert (sandbox.starts, sandbox.resets) == (0, 1)


def test_admin_run(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    with pytest.raises(EpisodeStateError):
        env.admin_run("true")
    env.reset(options={"task_id": "count"})
    result = env.admin_run("cat data.txt; exit 4")
    assert result.observation == "a\nb\nc\n" and result.error and result.details["exit_code"] == 4
    assert env.steps == 0


def test_render_action_replays_the_reference(sandbox: FakeSandbox) -> None:
    env = make_env(sandbox)
    for task_id in ("count", "state"):
        env.reset(options={"task_id": task_id})
        reward = 0.0
        for step in env.task.reference_solution:  # type: ignore[union-attr]
            _, reward, *_ = env.step(env.render_action(step))
        assert reward == 1.0


def test_options_are_checked(sandbox: FakeSandbox) -> None:
    with pytest.raises(ConfigError):
        OSEnv(sandbox=sandbox, tasks=[COUNT], observation_limit=0)
    with pytest.raises(ConfigError):
        OSEnv(sandbox=sandbox, tasks=[COUNT], image="x")


def test_check_env_and_gym_make(sandbox: FakeSandbox) -> None:
    check_env(make_env(sandbox), skip_render_check=True)
    env = gym.make("AgentUnit/OS-v0", sandbox=sandbox, tasks=[COUNT])
    _, info = env.reset(seed=3)
    assert info["task_id"] == "count"
    env.close()


# --------------------------------------------------------------------- spec


@pytest.mark.parametrize(("evaluation", "message"), [
    ({"match": "1", "check": ["true"]}, "exactly one of match, check"),
    ({}, "exactly one of match, check"),
    ({"check": [None]}, "no example script"),
    ({"check": [{"builtin": "nope"}]}, "unknown builtin"),
    ({"check": [{"code": "true", "file": "x.sh"}]}, "exactly one of code, file, builtin"),
    ({"match": {"regex": "("}}, "invalid regex"),
])
def test_spec_rejects_bad_evaluations(evaluation: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _task(evaluation=evaluation)


def test_spec_shorthands() -> None:
    task = _task(init="echo one", evaluation={"match": 7},
                 reference_solution=[{"answer": 7}])
    assert task.init[0].code == "echo one" and task.evaluation.match.answer == "7"  # type: ignore[union-attr]
    assert task.reference_solution[0].arguments == "7"
    checked = _task(evaluation={"check": "test -f x"})
    assert checked.evaluation.check[0].code == "test -f x"  # type: ignore[index,union-attr]
    assert _task(evaluation={"check": [{"builtin": "contains"}]}).evaluation.check[0].language == "python"  # type: ignore[index,union-attr]
    with pytest.raises(ValidationError, match="must end with answer or finish"):
        _task(reference_solution=[{"bash": "ls"}])
    with pytest.raises(ValidationError, match="unknown tool"):
        _task(reference_solution=[{"python": "1"}, {"finish": None}])


# ------------------------------------------------------------ real backends


def test_check_env_on_local() -> None:
    env = gym.make("AgentUnit/OS-v0", backend="local")
    try:
        check_env(env.unwrapped, skip_render_check=True)
        _, info = env.reset(options={"task_id": "os-proc-env-var"})
        assert info["backend"] == "local"
        obs, *_ = env.step("Think: look.\nAct: bash\n```bash\necho \"$DEPLOY_STAGE\"\n```")
        assert obs == "The output of the OS:\n\ncanary-7\n"
        assert env.step("Act: answer(canary-7)")[1] == 1.0
    finally:
        env.close()


@pytest.mark.docker
def test_check_env_on_docker() -> None:
    env = gym.make("AgentUnit/OS-v0", backend="docker")
    try:
        check_env(env.unwrapped, skip_render_check=True)
        _, info = env.reset(options={"task_id": "os-users-create"})
        assert info["backend"] == "docker"
        env.step("Act: bash\n```bash\nuseradd -m -d /home/deploy -s /bin/bash deploy\n```")
        assert env.unwrapped.admin_run("getent passwd deploy | cut -d: -f7").observation == "/bin/bash\n"
        assert env.step("Act: finish")[1] == 1.0
    finally:
        env.close()


def test_env_closes_the_sandbox_it_made() -> None:
    env = OSEnv(backend="local", tasks=[EXACT])
    env.reset(options={"task_id": "exact"})
    sandbox = env.sandbox
    base = sandbox.host_dir  # type: ignore[attr-defined]  # the local sandbox's private temp dir
    assert base is not None and base.exists()
    env.close()
    env.close()
    assert sandbox._closed and not base.exists()  # type: ignore[attr-defined]


# ------------------------------------------------------------------ property

_PIECES = st.sampled_from(["Think: x\n", "Act: ", "bash", "answer(", ")", "finish", "```bash\n", "```", "\n",
                           "Act: answer(", "ls -l", "{", '"name"', "python", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12))
def test_parser_never_raises_and_classifies(pieces: list[str]) -> None:
    env = OSEnv(sandbox=FakeSandbox(Path("/nonexistent")), tasks=[EXACT])
    text = "".join(pieces)
    parsed = env.parse_action(text)
    if isinstance(parsed, ActionError):
        assert parsed.reason in (FinishReason.INVALID_FORMAT, FinishReason.INVALID_ACTION)
        assert parsed.feedback().startswith(("Invalid format:", "Invalid action:"))
    else:
        assert parsed.tool in ("bash", "answer", "finish")
        if parsed.tool == "bash":
            assert parsed.arguments["script"].strip()
