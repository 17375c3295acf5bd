"""The OS task spec: a shell task run in a sandbox, graded by a match or a check pipeline.

The model follows AgentBench's ``os_interaction`` items (see docs/tasks.md): init scripts
prepare the sandbox, an optional start script runs in the agent's shell (background
processes), and the evaluation is exactly one of

- ``match``: the agent's answer compared with an exact string (after stripping) or a regex;
- ``check``: a pipeline of scripts run in the sandbox with AgentBench's semantics: params
  start as ``[answer]``; each script runs as its own command with the params as arguments
  (``$1``, ``$2``... or ``sys.argv[1:]``); a non-zero exit fails the task, else its stdout is
  appended to the params. A ``null`` entry runs the ``example`` script in its place.

The four standard check helpers ship as built-in scripts (``{builtin: integer-match}``,
see :mod:`agentunit_gym.domains.os.checks`) so task files do not need a scripts folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from agentunit_gym.domains.os.checks import CHECK_HELPERS
from agentunit_gym.domains.os.tools import COMMITTING_TOOLS, TOOL_NAMES
from agentunit_gym.errors import TaskFileError
from agentunit_gym.tasks.spec import TaskSpec

Language = Literal["bash", "python"]
ImageFlavour = Literal["default", "packages", "ubuntu"]

class Script(BaseModel):
    """A script: bash or python code given inline, in a file, or by built-in name.

    In task files a bare string is bash code; otherwise a mapping with exactly one of
    ``code``, ``file`` or ``builtin``, and ``language``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str | None = None
    """The script's source."""
    file: str | None = None
    """A script file, absolute or relative to the task's ``script_dir``."""
    builtin: str | None = None
    """A built-in check helper: ``integer-match``, ``string-match``, ``size-match``, ``contains``."""
    language: Language = "bash"
    """``bash`` or ``python``."""

    @model_validator(mode="before")
    @classmethod
    def _bare_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"code": data}
        if isinstance(data, dict) and "builtin" in data and "language" not in data:
            return {**data, "language": "python"}  # every built-in helper is python
        return data

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Script:
        given = [name for name in ("code", "file", "builtin") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"a script needs exactly one of code, file, builtin; got {given or 'none'}")
        if self.builtin is not None:
            if self.builtin not in CHECK_HELPERS:
                raise ValueError(f"unknown builtin {self.builtin!r}; known: {', '.join(sorted(CHECK_HELPERS))}")
            if self.language != "python":
                raise ValueError(f"builtin {self.builtin!r} is a python script, not {self.language}")
        return self

    def source(self, script_dir: str | None) -> str:
        """The script's code, reading ``file`` when needed.

        Raises:
            TaskFileError: the file cannot be read.
        """
        if self.code is not None:
            return self.code
        if self.builtin is not None:
            return CHECK_HELPERS[self.builtin].source
        assert self.file is not None  # guaranteed by the validator
        path = Path(self.file)
        if not path.is_absolute():
            if script_dir is None:
                raise TaskFileError(self.file, "a relative script file needs the task's script_dir.")
            path = Path(script_dir) / path
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskFileError(str(path), f"cannot read the script ({exc}).") from exc


class Match(BaseModel):
    """Compare the answer with an exact string or a regex."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer: str | None = None
    """The expected answer."""
    regex: str | None = None
    """A pattern searched in the answer (``re.search``; anchor it for a full match)."""
    strip: bool = True
    """Strip surrounding whitespace from both sides before comparing."""

    @model_validator(mode="before")
    @classmethod
    def _bare_string(cls, data: Any) -> Any:
        if isinstance(data, (str, int, float)) and not isinstance(data, bool):
            return {"answer": str(data)}
        return data

    @field_validator("answer", mode="before")
    @classmethod
    def _number_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _one_of(self) -> Match:
        if (self.answer is None) == (self.regex is None):
            raise ValueError("match needs exactly one of answer, regex")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex {self.regex!r}: {exc}") from exc
        return self

    def accepts(self, answer: str) -> bool:
        """Whether ``answer`` matches."""
        text = answer.strip() if self.strip else answer
        if self.regex is not None:
            return re.search(self.regex, text) is not None
        expected = self.answer.strip() if self.strip and self.answer is not None else self.answer
        return text == expected


class Evaluation(BaseModel):
    """How an episode is graded: exactly one of ``match`` or ``check``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    match: Match | None = None
    """Answer comparison."""
    check: tuple[Script | None, ...] | None = None
    """Check pipeline; a ``null`` entry runs ``example`` there."""
    example: Script | None = None
    """The reference solution script (its stdout is the reference output)."""

    @field_validator("check", mode="before")
    @classmethod
    def _single_script(cls, value: Any) -> Any:
        if isinstance(value, (str, dict)):
            return [value]
        return value

    @model_validator(mode="after")
    def _one_method(self) -> Evaluation:
        if (self.match is None) == (self.check is None):
            raise ValueError("evaluation needs exactly one of match, check")
        if self.check is not None:
            if not self.check:
                raise ValueError("check needs at least one script")
            if any(s is None for s in self.check) and self.example is None:
                raise ValueError("check has a null entry (run the example) but no example script")
        return self

    @property
    def method(self) -> str:
        return "match" if self.match is not None else "check"


class OSTask(TaskSpec):
    """A shell task for ``AgentUnit/OS-v0``."""

    image: ImageFlavour = "default"
    """Image flavour (AgentBench's ``create.local``): ``default``, ``packages``, ``ubuntu``."""
    init: tuple[Script, ...] = ()
    """Scripts run as root, each as its own command, before the episode; a failure aborts it."""
    start: Script | None = None
    """Run in the agent's shell before the first turn (e.g. to launch background jobs)."""
    evaluation: Evaluation
    """How the episode is graded."""
    script_dir: str | None = None
    """Folder relative script files resolve against; defaults to the task file's folder."""
    needs_users: bool = False
    """The task acts as other users (``su``, ``chown jack``, ``runuser``). It runs only where
    the sandbox can switch users (docker; the local sandbox when started by root); elsewhere
    the env refuses it (:meth:`~agentunit_gym.domains.os.env.OSEnv.not_runnable`) and a run
    leaves it out, as a backend that cannot run a task is."""
    users_note: str | None = None
    """What switches users (the AgentBench loader names the commands it found)."""

    def list_notes(self) -> tuple[str, ...]:
        """``needs network`` and ``switches users``, as they apply."""
        return (*super().list_notes(), *(("switches users",) if self.needs_users else ()))

    @field_validator("init", mode="before")
    @classmethod
    def _single_init(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, (str, dict)):
            return [value]
        return value

    @model_validator(mode="after")
    def _reference_commits(self) -> OSTask:
        for step in self.reference_solution:
            if step.tool not in TOOL_NAMES:
                raise ValueError(
                    f"reference step uses unknown tool {step.tool!r}; the tools are {', '.join(TOOL_NAMES)}"
                )
        if self.reference_solution and self.reference_solution[-1].tool not in COMMITTING_TOOLS:
            raise ValueError(f"the reference solution must end with {' or '.join(COMMITTING_TOOLS)}")
        return self

    @property
    def scripts_base(self) -> str | None:
        """Where relative script files resolve: ``script_dir``, else the folder of ``source``."""
        if self.script_dir is not None:
            return self.script_dir
        if self.source:
            path = self.source.rsplit("#", 1)[0]
            if path:
                return str(Path(path).parent)
        return None
