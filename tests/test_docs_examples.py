"""Every example of README.md and docs/ runs as written, as a file of its own.

Each fenced ``python`` block runs as ``python example.py``, and each ``bash``/``sh``/``shell``/
``console`` block as ``bash -e example.sh``, in a subprocess, in an empty folder of the test's
own (so what an example writes lands there), with a deadline: a block that hangs is killed
with its children and fails. The subprocess imports the checkout under test (``PYTHONPATH``),
``agentunit-gym`` and ``python`` in shell blocks are this interpreter, and no Docker daemon
answers (``DOCKER_HOST`` points nowhere), so ``auto`` backends pick the embedded ones.

What a page writes around a block, on the line before its fence:

- ``<!-- not run: REASON -->``: the block is not run, and says why (it installs packages,
  needs Docker, a model endpoint, an AgentBench checkout, your own files, or serves until
  stopped). A marker without a reason fails, as ``Example (not run: ...)::`` does in the
  doctests (tests/test_doctests.py). A reason ``an excerpt of PATH, ...`` says the block quotes a
  file that runs elsewhere: its lines must be in that file.
- ``<!-- continues the block above -->``: the block is the next step of the page's previous
  runnable block and runs after it, in the same file.
- ``<!-- runs against: agentunit-gym serve ARGS -->``: the block is a client of that server at
  ``http://127.0.0.1:8000``; the test starts the server (on a free port, which replaces that
  address in the block) for the block's run, and stops it with Ctrl-C.

and after it:

- ``<!-- output of the block above -->`` and then a fenced block: what the block prints. The
  real output must match it, doctest-style: ``...`` stands for any text, trailing spaces and
  blank lines at the end do not count. A Python block that shows printed values in comments
  (``print(x)  # 42``) must have one, so a sample output in a page is always checked; a bare
  expression (``result.rows``), which shows nothing in a file, fails: print it.

Python blocks that start processes (async vector envs, ``multiprocessing``) need an
``if __name__ == "__main__":`` guard: spawned children import the file again.

An untagged block that starts with a command (``agentunit-gym``, ``python``, ``pip`` ...) fails:
tag it ``bash`` (marked if it cannot run) so it is either run or says why not.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.clitools import default_sigint

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

LANGUAGES = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell",
             "console": "shell"}
"""The fence tags of runnable blocks, and how each runs."""

NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
ANY_NOT_RUN = re.compile(r"<!--\s*not[ -]run", re.IGNORECASE)
CONTINUES = "<!-- continues the block above -->"
RUNS_AGAINST = re.compile(r"^<!-- runs against: agentunit-gym serve (?P<arguments>\S.*?) -->$")
SERVER_ADDRESS = "http://127.0.0.1:8000"
"""Where a block that runs against a server finds it; the test's server is elsewhere."""
OUTPUT = "<!-- output of the block above -->"

COMMAND = re.compile(r"^\s*(\$ )?(agentunit-gym|python|pip|pytest|bash|git|curl|export|uv|vf-eval|ray)(\s|$)")
"""The first line of an untagged block that is a command in disguise."""

SHOWN_PRINT = re.compile(r"^\s*print\(.*\)\s+#\s*\S")
"""A ``print(...)`` followed by a comment: a printed value shown in the page."""

STARTS_PROCESSES = re.compile(r'AsyncVectorEnv|vectorization_mode="async"|multiprocessing|ProcessPool|context="spawn"')
"""Code that starts Python processes, which may import the example's file again (spawn and
forkserver, the defaults on macOS and from Python 3.14)."""

DEADLINE = 120.0
"""Seconds a block may run; a hang (say, spawned processes without a ``__main__`` guard) is
killed at this deadline and fails."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, and what the page says around it."""

    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    before: str  # the nearest non-blank line above the fence ("" at the top)
    output: str | None = None  # the block after an OUTPUT marker
    prelude: str = ""  # the code of the blocks it continues

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page.name}:{self.line}"

    @property
    def kind(self) -> str | None:
        """``python`` or ``shell`` for a runnable tag, else None."""
        return LANGUAGES.get(self.language)

    @property
    def server(self) -> str | None:
        """The ``agentunit-gym serve`` arguments of the server the block runs against, if any."""
        found = RUNS_AGAINST.match(self.before)
        return found.group("arguments") if found else None

    @property
    def reason(self) -> str | None:
        """Why the block is not run, when the page says it is not."""
        found = NOT_RUN.match(self.before)
        return found.group("reason") if found else None


_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, CommonMark's way: a fence closes on the same
    character at least as long, a backtick fence's tag holds no backtick, and fences inside a
    block are its text. Output blocks are attached to the block they follow; a block marked as
    continuing gets the code of the runnable block above it as its prelude."""
    lines = page.read_text(encoding="utf-8").splitlines()
    raw: list[tuple[int, str, str, str]] = []  # (line index, tag, code, line before)
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        code = textwrap.dedent("\n".join(line[indent:] if line[:indent].isspace() else line
                                         for line in lines[index + 1:end]))
        before = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        raw.append((index, opening["info"].strip().split(" ")[0].lower(), code + "\n", before))
        index = end + 1
    blocks: list[Block] = []
    position = 0
    while position < len(raw):
        index, tag, code, before = raw[position]
        output = None
        if position + 1 < len(raw) and raw[position + 1][3] == OUTPUT:
            output = raw[position + 1][2]
            position += 1
        prelude = ""
        if before == CONTINUES:
            previous = next((b for b in reversed(blocks) if b.kind is not None), None)
            prelude = previous.prelude + previous.code if previous is not None else ""
        blocks.append(Block(page, index + 1, tag, code, before, output, prelude))
        position += 1
    return blocks


BLOCKS = [block for page in PAGES for block in read_blocks(page)]
RUNNABLE = [block for block in BLOCKS if block.kind is not None and block.reason is None]


def _shims(folder: Path) -> Path:
    """A folder for PATH whose ``agentunit-gym`` and ``python`` are this interpreter."""
    folder.mkdir()
    for name, command in (("agentunit-gym", f'"{sys.executable}" -m agentunit_gym "$@"'),
                          ("python", f'"{sys.executable}" "$@"'), ("python3", f'"{sys.executable}" "$@"')):
        shim = folder / name
        shim.write_text(f"#!/bin/sh\nexec {command}\n", encoding="utf-8")
        shim.chmod(0o755)
    return folder


def run_block(block: Block, tmp_path: Path, deadline: float = DEADLINE,
              address: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``block`` as a file in ``tmp_path/work``; fail if it outlives ``deadline``. With
    ``address``, the block's server address (``http://127.0.0.1:8000``) is replaced by it."""
    work = tmp_path / "work"
    work.mkdir()
    if block.kind == "python":
        script, command = work / "example.py", [sys.executable, "example.py"]
    else:
        script, command = work / "example.sh", ["bash", "-e", "example.sh"]
    code = block.prelude + block.code
    script.write_text(code.replace(SERVER_ADDRESS, address) if address else code, encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
                   "PATH": f"{_shims(tmp_path / 'bin')}{os.pathsep}{os.environ.get('PATH', '')}",
                   "DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}", "COLUMNS": "200",
                   "PYTHONUNBUFFERED": "1"}
    # A session of its own, so a hang is killed with every process it started.
    process = subprocess.Popen(command, cwd=work, env=environment, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{block.name} did not end within {deadline:.0f} s and was killed (does it start processes "
                    f"without an `if __name__ == \"__main__\":` guard, or wait on a server?)\n"
                    f"--- stdout ---\n{stdout[-2000:]}\n--- stderr ---\n{stderr[-3000:]}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines()) + "\n"


def check_output(block: Block, printed: str) -> None:
    """Fail unless ``printed`` is the output the page shows after ``block`` (``...`` matches anything)."""
    assert block.output is not None
    want, got = _normalized(block.output), _normalized(printed)
    checker = doctest.OutputChecker()
    if not checker.check_output(want, got, doctest.ELLIPSIS):
        example = doctest.Example("", want)
        pytest.fail(f"{block.name} printed something else than the page shows:\n"
                    + checker.output_difference(example, got, doctest.ELLIPSIS))


# -- the pages' conventions ------------------------------------------------------------------


def test_the_pages_are_collected() -> None:
    # Guards the collection: a reader that finds nothing would pass every case below vacuously.
    names = {block.name for block in RUNNABLE}
    assert len(RUNNABLE) >= 25 and {"README.md", "docs/training.md", "docs/core.md"} <= {n.split(":")[0] for n in names}


def test_every_marker_is_well_formed() -> None:
    bad = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("<!--") and ANY_NOT_RUN.search(line) and not NOT_RUN.match(line.strip()):
                bad.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bad == [], "write '<!-- not run: <the reason> -->' on the line before the fence"


def test_markers_stand_before_runnable_blocks() -> None:
    misplaced = [f"{b.name}: {b.before}" for b in BLOCKS
                 if b.kind is None and (b.before == CONTINUES or NOT_RUN.match(b.before) or b.server)]
    misplaced += [f"{b.name}: nothing above to continue" for b in BLOCKS if b.before == CONTINUES and not b.prelude]
    misplaced += [f"{b.name}: an output no run checks" for b in BLOCKS
                  if b.output is not None and (b.kind is None or b.reason is not None)]
    outputs = sum(page.read_text(encoding="utf-8").count(OUTPUT) for page in PAGES)
    if outputs != sum(b.output is not None for b in BLOCKS):
        misplaced.append(f"{OUTPUT} belongs right after a block's closing fence, before the output's block")
    assert misplaced == [], "a marker belongs before a python or shell block"


def test_commands_are_tagged() -> None:
    untagged = [f"{b.name}: {b.code.splitlines()[0]}" for b in BLOCKS
                if b.language == "" and b.code.strip() and COMMAND.match(b.code.splitlines()[0])
                and b.before != OUTPUT]
    assert untagged == [], "tag command blocks ```bash (with a 'not run' marker if they cannot run)"


def test_shown_printed_values_are_checked() -> None:
    unchecked = [f"{b.name}: {line.strip()}" for b in RUNNABLE if b.kind == "python" and b.output is None
                 for line in b.code.splitlines() if SHOWN_PRINT.match(line)]
    assert unchecked == [], f"add the output after the block ({OUTPUT} and a ```text block)"


def test_excerpts_are_in_their_files() -> None:
    # A block marked "not run: an excerpt of PATH, ..." is a part of a file that runs elsewhere:
    # each of its lines (comments, spacing and `...` elisions aside) is in that file.
    def squeezed(text: str) -> str:
        return "".join(re.sub(r"\s+#.*$", "", line).replace(" ", "") for line in text.splitlines())

    drifted = []
    for block in BLOCKS:
        found = re.match(r"an excerpt of (\S+?),", block.reason or "")
        if found:
            source = squeezed((ROOT / found.group(1)).read_text(encoding="utf-8"))
            drifted += [f"{block.name}: {line.strip()}" for line in block.code.splitlines()
                        if "..." not in line and squeezed(line) not in source]
    assert drifted == [], "the page's excerpt differs from the file it quotes"


def test_no_value_is_left_unprinted() -> None:
    # A bare expression (`result.rows`) shows its value at a prompt and nothing in a file.
    bare = [f"{b.name}: {ast.unparse(node)}" for b in RUNNABLE if b.kind == "python"
            for node in ast.walk(ast.parse(b.code)) if isinstance(node, ast.Expr)
            and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.Constant))]
    assert bare == [], "print the value (and show the output after the block)"


def test_examples_that_start_processes_have_a_main_guard() -> None:
    # On Linux with Python < 3.14 (fork) they would pass here and hang on a user's Mac.
    unguarded = [b.name for b in RUNNABLE if b.kind == "python" and STARTS_PROCESSES.search(b.code)
                 and 'if __name__ == "__main__":' not in b.prelude + b.code]
    assert unguarded == [], 'put the example under `if __name__ == "__main__":`'


@contextlib.contextmanager
def serving(arguments: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``agentunit-gym serve ARGUMENTS`` on a port the system picks, as a user starts it: yields its
    URL and the banner it printed, and stops it with Ctrl-C (exit 130, the shell's code for it)."""
    words = shlex.split(arguments)
    if "--port" in words:
        words[words.index("--port") + 1] = "0"
    else:
        words += ["--port", "0"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "DOCKER_HOST": f"unix://{tmp_path / 'no-docker.sock'}"}
    log = tmp_path / "server-stderr.txt"
    with log.open("w") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "agentunit_gym", "serve", *words], cwd=tmp_path,
                                  env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                  text=True, preexec_fn=default_sigint)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(server.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            assert selector.select(timeout=DEADLINE), f"serve printed nothing in {DEADLINE:.0f} s: {log.read_text()}"
        banner = server.stdout.readline()  # type: ignore[union-attr]
        url = re.search(r"https?://[\w.]+:\d+", banner)
        assert url is not None, f"serve printed no URL: {banner!r} {log.read_text()[-3000:]}"
        yield url.group(0), banner
        server.send_signal(signal.SIGINT)  # Ctrl-C stops it, as the banner says
        assert server.wait(timeout=DEADLINE) == 130, log.read_text()[-3000:]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


# -- the examples ----------------------------------------------------------------------------


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_example_runs(block: Block, tmp_path: Path) -> None:
    if block.server is None:
        done = run_block(block, tmp_path)
    else:
        with serving(block.server, tmp_path) as (url, _):
            done = run_block(block, tmp_path, address=url)
    assert done.returncode == 0, (f"{block.name} exited with {done.returncode}\n"
                                  f"--- stdout ---\n{done.stdout[-2000:]}\n--- stderr ---\n{done.stderr[-3000:]}")
    if block.output is not None:
        check_output(block, done.stdout)


# -- the reader and the runner, on pages of their own ----------------------------------------

SAMPLE = """\
# A page

<!-- not run: it needs a model endpoint -->
```bash
agentunit-gym eval --agent openai:m
```

```python
x = 2
print(x)  # 2
```
<!-- output of the block above -->
```text
2
```

<!-- continues the block above -->
```python
print(x + 1)
```

````
```python
not a block of its own
```
````

Inline ```` ```json ```` is no fence.

~~~text
```bash
inside
```
~~~

```
agentunit-gym tasks list
```
"""


def test_the_reader_sees_what_a_page_says(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SAMPLE, encoding="utf-8")
    blocks = read_blocks(page)
    assert [(b.line, b.language, b.kind, b.reason) for b in blocks] == [
        (4, "bash", "shell", "it needs a model endpoint"), (8, "python", "python", None),
        (18, "python", "python", None), (22, "", None, None), (30, "text", None, None), (36, "", None, None)]
    assert blocks[1].output == "2\n" and blocks[2].prelude == "x = 2\nprint(x)  # 2\n"
    assert blocks[3].code == '```python\nnot a block of its own\n```\n'
    assert COMMAND.match(blocks[5].code)


def test_a_block_is_run_and_its_output_checked(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SAMPLE, encoding="utf-8")
    _, first, second, *_ = read_blocks(page)
    done = run_block(second, tmp_path)
    assert (done.returncode, done.stdout) == (0, "2\n3\n")
    check_output(first, "2\n")
    with pytest.raises(pytest.fail.Exception, match="printed something else"):
        check_output(first, "3\n")


def test_a_client_block_names_its_server(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- runs against: agentunit-gym serve --env DB-v0 --port 8000 -->\n```python\n"
                    "print('http://127.0.0.1:8000/health')\n```\n", encoding="utf-8")
    (block,) = read_blocks(page)
    assert (block.kind, block.reason, block.server) == ("python", None, "--env DB-v0 --port 8000")
    done = run_block(block, tmp_path, address="http://127.0.0.1:4321")
    assert done.stdout == "http://127.0.0.1:4321/health\n"


def test_a_shell_block_runs_the_checkout_under_test(tmp_path: Path) -> None:
    block = Block(tmp_path / "p.md", 1, "bash", "agentunit-gym --help >/dev/null\n"
                  "python -c 'import agentunit_gym; print(agentunit_gym.__file__)'\nfalse\necho not reached\n", "")
    done = run_block(block, tmp_path)
    assert done.returncode == 1 and done.stdout == f"{ROOT / 'agentunit_gym' / '__init__.py'}\n"


def test_a_hang_is_killed_and_fails(tmp_path: Path) -> None:
    # A parent that waits forever on a child it started (as the pickling example did on a
    # spawned child): both go at the deadline.
    child = tmp_path / "child.pid"
    code = ("import subprocess, sys\n"
            "sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            f"open({str(child)!r}, 'w').write(str(sleeper.pid))\n"
            "sleeper.wait()\n")
    block = Block(tmp_path / "p.md", 1, "python", code, "")
    with pytest.raises(pytest.fail.Exception, match=r"p\.md:1 did not end within 10 s and was killed"):
        run_block(block, tmp_path, deadline=10)
    status = Path(f"/proc/{child.read_text()}/stat")
    deadline = time.monotonic() + 30
    while status.exists() and status.read_text().split(") ")[-1][:1] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)  # SIGKILL is delivered, not awaited: wait for the child to be gone
    assert not status.exists() or status.read_text().split(") ")[-1][:1] == "Z", "the child outlived the deadline"


# -- a sample the pages show from a server, which no block can run ---------------------------


def test_the_serve_example_in_serving_md_prints_and_answers_what_the_page_shows(tmp_path: Path) -> None:
    """docs/serving.md shows what ``agentunit-gym serve --env DB-v0 --backend sqlite`` prints and what
    ``curl /health`` answers; the block serves until Ctrl-C, so it is not run as a file. Here the
    same command runs (on a port the system picks), and its banner and /health answer are the page's."""
    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    found = re.search(r"^agentunit-gym serve (.*)\n# (.*)\ncurl -s (http://127\.0\.0\.1:8000)/health\n((?:# .*\n)+)",
                      page, re.MULTILINE)
    assert found is not None, "docs/serving.md lost its serve and /health sample"
    arguments, banner, url, health = found.groups()
    shown = json.loads("".join(line[2:] for line in health.splitlines()))
    with serving(arguments, tmp_path) as (served, printed):
        want = banner.replace(url, "http://127.0.0.1:...") + "\n"
        assert doctest.OutputChecker().check_output(want, printed, doctest.ELLIPSIS), printed
        deadline = time.monotonic() + DEADLINE
        while True:  # the warm copies are built in the background: wait for the pool to fill
            with urllib.request.urlopen(f"{served}/health", timeout=30) as response:
                answer = json.load(response)
            if answer["sessions"]["warm"] >= shown["sessions"]["warm"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert answer == shown


def test_the_task_file_error_in_tasks_md_is_the_loaders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/tasks.md shows the error a task file that does not validate raises: a file like the one
    it describes (an OS task whose check runs the example, without one) raises exactly that."""
    from agentunit_gym.domains.os.task import OSTask
    from agentunit_gym.errors import TaskFileError
    from agentunit_gym.tasks.loader import load_tasks

    page = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    found = re.search(r"raises `TaskFileError` naming the file, the task and the field:\n\n```\n(.*)\n```", page)
    assert found is not None, "docs/tasks.md lost its TaskFileError sample"
    monkeypatch.chdir(tmp_path)
    Path("my_tasks.yaml").write_text("id: x\ninstruction: count the files\nevaluation:\n  check: [null]\n",
                                     encoding="utf-8")
    with pytest.raises(TaskFileError) as raised:
        load_tasks(["my_tasks.yaml"], OSTask)
    assert str(raised.value) == found.group(1)


def test_the_no_task_error_in_tasks_md_is_the_clis(tmp_path: Path) -> None:
    """docs/tasks.md shows what ``eval --tasks`` says, exit 2, when no task loads from a path: a
    ``broken.json`` that is not JSON gets that message (its path written in full, the folder aside)."""
    page = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    found = re.search(r"\n```\n(agentunit-gym: error: broken\.json: .*?\n)```", page, re.DOTALL)
    assert found is not None, "docs/tasks.md lost its sample of a task file from which no task loads"
    (tmp_path / "broken.json").write_text("{x}", encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "agentunit_gym", "eval", "--tasks", "broken.json"], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=DEADLINE, check=False)
    assert done.returncode == 2
    assert done.stderr.replace(f"{tmp_path}{os.sep}", "") == found.group(1)
