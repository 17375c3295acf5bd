"""``AgentUnit/OS-v0``: the AgentBench OS-interaction task as a gymnasium env.

The agent works in one persistent bash inside a sandbox (docker or local). Each step it
replies in AgentBench's grammar::

    Think: <reasoning>
    Act: bash
    ```bash
    <commands>
    ```

or ``Act: answer(<text>)`` to commit an answer, or ``Act: finish`` to say a state-changing
task is done; the last ``Act:`` of a reply wins. JSON tool calls (``bash``, ``answer``,
``finish``) work too. See docs/envs/os.md for observations and scoring.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from functools import partial
from operator import methodcaller
from typing import Any

from agentunit_gym.backends.sandbox.base import ExecResult, Sandbox
from agentunit_gym.core.actions import Action, ActionError, ActionIssue, suggest
from agentunit_gym.core.backend_handle import BackendHandle
from agentunit_gym.core.env import ActionFormat, AgentEnv, Execution, InvalidPolicy, TaskSource
from agentunit_gym.core.score import Score
from agentunit_gym.domains.os.checks import CHECK_HELPERS
from agentunit_gym.domains.os.domain import DOMAIN
from agentunit_gym.domains.os.task import OSTask, Script
from agentunit_gym.domains.os.tools import GRAMMAR, INTRO, TOOL_NAMES, TOOLS
from agentunit_gym.domains.os.users import ONE_UID, ONE_UID_HINT
from agentunit_gym.errors import BackendError, ConfigError, EpisodeStateError
from agentunit_gym.tasks.spec import Refusal

CHECK_TIMEOUT = 60.0
"""Seconds a check or init script may run (ours, generous: a slow check is not the agent's fault)."""

_ACT = re.compile(r"^[ \t>*#-]*Act\s*:[ \t]*(.*)$", re.MULTILINE | re.IGNORECASE)
_KEYWORD = re.compile(r"([A-Za-z_][\w-]*)")
_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*(bash|sh|shell)?[ \t]*$", re.MULTILINE | re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)


_EMPTY_OUTPUT = "The output of the OS is empty."
_OUTPUT_HEAD = "The output of the OS:\n\n"
_NOTE = re.compile(r"\n\[(?:output truncated: [^\n]*|command timed out after [^\n]*|exit code -?\d+)\]$")


def shown_output(observation: str) -> str:
    """The command output an observation of this env shows, without our framing, our notes
    and trailing newlines.

    What an agent reading the observation would answer with; the oracle uses it for
    reference answers taken from a command's output (output past the observation limit is
    not shown, so not returned either).
    """
    if observation == _EMPTY_OUTPUT or not observation.startswith(_OUTPUT_HEAD):
        return ""
    text = observation[len(_OUTPUT_HEAD):]
    while True:
        note = _NOTE.search(text)
        if note is None:
            return text.rstrip("\n")
        text = text[: note.start()]


class OSEnv(AgentEnv[OSTask]):
    """The OS shell env.

    Args:
        backend: ``"local"`` or ``"docker"``; None (the default) is ``local`` on every host, so
            the same (task, seed) gives the same observation everywhere; ``"auto"`` is docker
            when a daemon answers, else local (what ``agentunit-gym eval`` asks for).
        tasks: the suite: None for the bundled one, task files or folders, or task specs.
        max_steps: turn limit (default 8, as AgentBench).
        invalid_action: ``"continue"`` or ``"terminate"`` (see :class:`~agentunit_gym.core.env.AgentEnv`).
        render_mode: None or ``"ansi"``.
        split: ``"train"`` or ``"test"``: the suite restricted to that split (docs/tasks.md, "Splits").
        action_format: ``"text"`` (default) or ``"tools"``: tool calls only (see ``AgentEnv``).
        observation_limit: characters of command output shown to the agent (AgentBench: 800).
        command_timeout: seconds a ``bash`` action may run before its process group is killed.
        sandbox: an existing sandbox to use; the env then does not close it.
        network: give the sandbox the network (off by default; both backends take it). Tasks
            that declare ``needs_network`` run only then; without it they are left out of
            :attr:`tasks` and ``reset`` refuses them. With an existing ``sandbox``, say whether
            that sandbox has the network.
        memory: what the agent's processes may use (``"256m"``, ``"1g"``, bytes); default 1 GiB.
        cpus: CPU time in cores; default 1.
        disk: what an episode may write (``"64m"``, ``"1g"``); default 1 GiB. Past it: "No
            space left on device".
        pids_limit: most processes at once; default 512. These four are the sandbox's
            resource limits, the same on both backends (docs/envs/os.md, "Resource limits");
            ``None`` keeps the default. Reachable with ``eval --env-option memory=256m``.
        **sandbox_options: passed to the sandbox factory, ``open_sandbox`` (e.g. ``image=`` for docker).

    Raises:
        ConfigError: a bad option.
        BackendUnavailableError: the backend asked for cannot run here.
    """

    DOMAIN = DOMAIN
    tools = TOOLS
    grammar = GRAMMAR

    def __init__(
        self,
        *,
        backend: str | None = None,
        tasks: TaskSource = None,
        max_steps: int | None = None,
        invalid_action: InvalidPolicy = "continue",
        render_mode: str | None = None,
        split: str | None = None,
        action_format: ActionFormat = "text",
        observation_limit: int = 800,
        command_timeout: float = 10.0,
        sandbox: Sandbox | None = None,
        network: bool = False,
        memory: str | int | None = None,
        cpus: float | str | None = None,
        disk: str | int | None = None,
        pids_limit: int | None = None,
        **sandbox_options: Any,
    ) -> None:
        # The resource limits travel with the other sandbox options (checked by the sandbox).
        limits = {"memory": memory, "cpus": cpus, "disk": disk, "pids_limit": pids_limit}
        sandbox_options.update({key: value for key, value in limits.items() if value is not None})
        if observation_limit < 1:
            raise ConfigError(f"observation_limit must be at least 1, got {observation_limit}.")
        if command_timeout <= 0:
            raise ConfigError(f"command_timeout must be positive, got {command_timeout}.")
        if sandbox is not None and sandbox_options:
            raise ConfigError(f"sandbox options {sorted(sandbox_options)} given with an existing sandbox.")
        if not isinstance(network, bool):
            raise ConfigError(f"network must be True or False, got {network!r}.")
        self.observation_limit = observation_limit
        self.command_timeout = command_timeout
        # Tasks first: a bad task file then fails before any container exists.
        super().__init__(tasks=tasks, max_steps=max_steps, invalid_action=invalid_action, render_mode=render_mode,
                         split=split, action_format=action_format)
        self.network = network
        # Reference answers taken from a command's output are read from the observation.
        self.codec = replace(self.codec, output_reader=shown_output)
        # A sandbox the env opened ran nothing yet: it is pristine, and the first reset skips sandbox.reset().
        self._sandbox: BackendHandle[Sandbox]
        if sandbox is not None:
            self._sandbox = BackendHandle.borrowed(sandbox, refusal=(
                "it runs in a sandbox object it was given (sandbox=...); make it with backend='local' or 'docker'."))
        else:
            if network:  # only when asked: the sandboxes' own default stays the one place for "off"
                sandbox_options["network"] = True
            # The domain's factory (imported on first use: it pulls in the docker SDK only then).
            opened = _open_sandbox(DOMAIN.embedded_backend.name if backend is None else backend, sandbox_options)
            # A copy in another process reopens the resolved kind, not "auto".
            reopen = partial(_open_sandbox, opened.kind, dict(sandbox_options))
            self._sandbox = BackendHandle.owned(opened, reopen=reopen, warm=methodcaller("start"))

    @property
    def sandbox(self) -> Sandbox:
        """The env's sandbox; a pickled or copied env opens a new one here on first use."""
        return self._sandbox.get()

    @property
    def backend_name(self) -> str:
        return self._sandbox.kind

    @property
    def backend_limits_off(self) -> str:
        """The sandbox's limits that do not apply here (a local sandbox without a cgroup or,
        not root, without its bounded tmpfs), with the reasons; ``""`` when all apply."""
        live = self._sandbox.live
        off = live.limits_off if live is not None else {}
        return "; ".join(f"{name}: {reason}" for name, reason in sorted(off.items()))

    @property
    def multi_user(self) -> bool:
        """Whether the sandbox can switch users (docker: yes; local: when started by root,
        see docs/sandbox-local.md). Tasks that declare ``needs_users`` run only then."""
        return self.sandbox.multi_user

    def _refusal(self, task: OSTask) -> Refusal | None:
        if task.needs_users and not self.multi_user:
            note = task.users_note or "acts as another user"
            return Refusal(f"not run on {self.backend_name}: {note}; {ONE_UID}", "switches users", ONE_UID_HINT)
        return None

    # ----------------------------------------------------------------- hooks

    def _start_episode(self, task: OSTask) -> str:
        sandbox = self.sandbox  # first: a pickled copy opens its own here, pristine
        if self._sandbox.pristine:
            sandbox.start()
        else:
            sandbox.reset()
        self._sandbox.pristine = False
        base = task.scripts_base
        for index, script in enumerate(task.init):
            result = self._run_script(script, base, ())
            if not result.ok:
                raise BackendError(
                    f"task {task.id!r}: init script {index + 1} of {len(task.init)} failed "
                    f"({_status(result)}): {result.output[-300:].strip()!r}. The task file is at fault; "
                    f"fix its init ({task.source or 'unknown source'})."
                )
        if task.start is not None:
            code = task.start.source(base)
            if task.start.language == "python":
                code = f"python3 -c {shlex.quote(code)}"
            result = self.sandbox.shell_setup(code, timeout=CHECK_TIMEOUT, max_output=1 << 16)
            if result.timed_out:
                raise BackendError(
                    f"task {task.id!r}: the start script did not return within {CHECK_TIMEOUT:g} s; "
                    "launch long-running processes in the background with '&'."
                )
        intro = INTRO.format(limit=self.observation_limit)
        return f"{intro}\n\n{GRAMMAR}\n\nTask: {task.instruction}"

    def _parse_react(self, text: str) -> Action | ActionError:
        acts = list(_ACT.finditer(text))
        if not acts:
            return ActionError(
                ActionIssue.NO_CALL, "no 'Act:' line found.",
                hint="End your reply with 'Act: bash' and a ```bash block, 'Act: answer(...)' or 'Act: finish'.",
            )
        last = acts[-1]
        thought = re.sub(r"^\s*Think\s*:\s*", "", text[: last.start()], flags=re.IGNORECASE).strip()
        rest = last.group(1).strip()
        keyword_match = _KEYWORD.match(rest)
        if keyword_match is None:
            return ActionError(ActionIssue.MALFORMED, f"'Act:' is followed by {rest[:40]!r}, not an action.",
                               hint="Write 'Act: bash', 'Act: answer(...)' or 'Act: finish'.")
        keyword = keyword_match.group(1)
        lowered = keyword.lower()
        if lowered == "bash":
            return self._parse_bash_block(text[last.end():], thought)
        if lowered == "answer":
            after = text[last.start(1) + keyword_match.end():]
            if not after.lstrip().startswith("("):
                return ActionError(ActionIssue.MALFORMED, "'Act: answer' needs the answer in parentheses.",
                                   hint="Write 'Act: answer(<your answer>)'.", tool="answer")
            body = after.lstrip()[1:]
            # The answer ends at the last ')' of the Act line; a multi-line answer at the last one.
            line_end = body.find("\n")
            close = body.rfind(")", 0, line_end) if line_end >= 0 else body.rfind(")")
            if close < 0:
                close = body.rfind(")")
            if close < 0:
                return ActionError(ActionIssue.MALFORMED, "'Act: answer(' is never closed with ')'.",
                                   hint="Write 'Act: answer(<your answer>)'.", tool="answer")
            return Action("answer", {"answer": body[:close]}, thought=thought)
        if lowered == "finish":
            return Action("finish", {}, thought=thought)
        return ActionError(
            ActionIssue.UNKNOWN_TOOL,
            f"unknown action {keyword!r}; the actions are bash, answer(...) and finish.",
            hint=suggest(keyword, list(TOOL_NAMES)), tool=keyword,
        )

    def _parse_bash_block(self, after: str, thought: str) -> Action | ActionError:
        opening = _FENCE_OPEN.search(after)
        if opening is None:
            return ActionError(ActionIssue.MALFORMED, "'Act: bash' is not followed by a ```bash code block.",
                               hint="Put the commands in a ```bash ... ``` block after 'Act: bash'.", tool="bash")
        closing = _FENCE_CLOSE.search(after, opening.end())
        if closing is None:
            return ActionError(ActionIssue.MALFORMED, "the ```bash block is never closed with ```.",
                               hint="End the block with a line holding only ```.", tool="bash")
        script = after[opening.end():closing.start()].strip("\n")
        if not script.strip():
            return ActionError(ActionIssue.MALFORMED, "the ```bash block is empty.", tool="bash")
        return Action("bash", {"script": script}, thought=thought)

    def _execute(self, action: Action) -> Execution:
        # Ask the sandbox for more than we show, so the observation can say how much was cut.
        cap = max(4 * self.observation_limit, 1 << 16)
        result = self.sandbox.shell(action.arguments["script"], timeout=self.command_timeout, max_output=cap)
        return Execution(self._observe(result), {
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "truncated": result.truncated or len(result.output) > self.observation_limit,
            "output_bytes": result.output_bytes,
            "duration_s": result.duration_s,
        }, error=not result.ok)

    def _observe(self, result: ExecResult) -> str:
        output = result.output
        notes: list[str] = []
        if result.truncated:
            # The sandbox stopped reading: only the byte count of the whole output is known.
            shown = min(len(output), self.observation_limit)
            notes.append(f"[output truncated: first {shown} characters of {result.output_bytes} bytes shown]")
            output = output[:shown]
        elif len(output) > self.observation_limit:
            notes.append(f"[output truncated: first {self.observation_limit} of {len(output)} characters shown]")
            output = output[: self.observation_limit]
        if result.timed_out:
            notes.append(f"[command timed out after {self.command_timeout:g} s and was stopped]")
        elif result.exit_code not in (0, None):
            notes.append(f"[exit code {result.exit_code}]")
        if not output.strip() and not notes:
            return "The output of the OS is empty."
        text = f"The output of the OS:\n\n{output}"
        if notes:
            text = text.rstrip("\n") + "\n" + "\n".join(notes)
        return text

    def _score(self, action: Action | None) -> Score:
        task = self.task
        assert task is not None  # the base only scores a running episode
        evaluation = task.evaluation
        if action is not None and action.tool == "answer":
            answer: str | None = action.arguments["answer"]
        else:
            answer = None
        if evaluation.match is not None:
            if answer is None:
                why = "finished without an answer" if action is not None else "no answer given"
                return Score.failed(f"{why}; this task expects answer(...)", method="match", exact_match=False)
            ok = evaluation.match.accepts(answer)
            return Score(reward=float(ok), success=ok, components={"method": "match", "exact_match": ok},
                         detail="answer matches" if ok else "answer does not match")
        return self._run_check(task, answer if answer is not None else "")

    def _run_check(self, task: OSTask, answer: str) -> Score:
        assert task.evaluation.check is not None
        params: list[str] = [answer]
        steps = task.evaluation.check
        base = task.scripts_base
        for index, entry in enumerate(steps):
            script = entry if entry is not None else task.evaluation.example
            assert script is not None  # the spec requires an example for null entries
            if script.builtin is not None:
                # A helper compares $1 and $2 and prints nothing: evaluate it here, no process.
                passed = CHECK_HELPERS[script.builtin].matches(params[0], params[1] if len(params) > 1 else "")
                status, output = ("passed" if passed else "exit code 1"), ""
            else:
                result = self._run_script(script, base, tuple(params))
                passed, status, output = result.ok, _status(result), result.output
            if not passed:
                what = "the example script" if entry is None else f"check script {index + 1}"
                return Score.failed(f"{what} failed ({status})", method="check",
                                    checks_passed=index, checks_total=len(steps))
            params.append(output)
        return Score(reward=1.0, success=True, detail="every check passed",
                     components={"method": "check", "checks_passed": len(steps), "checks_total": len(steps)})

    def _run_script(self, script: Script, base: str | None, args: tuple[str, ...]) -> ExecResult:
        return self.sandbox.run(script.source(base), timeout=CHECK_TIMEOUT, language=script.language, args=args)

    def _render_react(self, tool: str, arguments: dict[str, Any]) -> str:
        if tool == "bash":
            return f"Think: run a command.\nAct: bash\n```bash\n{arguments['script']}\n```"
        if tool == "answer":
            return f"Think: I know the answer.\nAct: answer({arguments['answer']})"
        if tool == "finish":
            return "Think: the task is done.\nAct: finish"
        raise ConfigError(f"the OS env has no tool {tool!r}.")

    def admin_run(self, command: str) -> Execution:
        """Run a root bash command in the sandbox, outside the agent's shell; not a step.

        Raises:
            EpisodeStateError: no episode has been started.
        """
        if self.task is None:
            raise EpisodeStateError("admin_run() needs an episode: call reset() first.")
        result = self.sandbox.run(command, timeout=CHECK_TIMEOUT)
        return Execution(result.output, {"exit_code": result.exit_code, "timed_out": result.timed_out,
                                         "truncated": result.truncated}, error=not result.ok)



def _open_sandbox(kind: str, options: dict[str, Any]) -> Sandbox:
    """The env's sandbox, in this process (a module function, so a pickled env can reopen it)."""
    sandbox: Sandbox = DOMAIN.open_backend(kind, **options)
    return sandbox


def _status(result: ExecResult) -> str:
    return "timed out" if result.timed_out else f"exit code {result.exit_code}"

