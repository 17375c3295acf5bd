"""Load AgentBench ``os_interaction`` items from a user's AgentBench checkout.

Layout (the checkout's ``data/`` folder)::

    os_interaction/data/dev.json          dev split      ids dev-001-dev-00003
    os_interaction/data/<N>/<stem>.json   test split     ids std-00N-<stem>-00003
    os_interaction/scripts/<split>/...    script files (<split> is dev or N)

A file holds a JSON list, a single object, or JSON Lines. Items become :class:`OSTask` with
AgentBench's own ids and check-pipeline semantics; ``file`` scripts resolve against the
split's scripts folder when they run.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentunit_gym.domains.os.network import network_commands
from agentunit_gym.domains.os.task import OSTask, Script
from agentunit_gym.domains.os.users import user_commands
from agentunit_gym.errors import ConfigError, TaskFileError
from agentunit_gym.tasks.loader import LoadProblem, LoadResult, parse_tasks, read_task_text

SPLITS = ("dev", "test")


def load_agentbench_os(
    data_dir: str | Path, splits: Iterable[str] = SPLITS, *, problems: list[LoadProblem] | None = None
) -> list[OSTask]:
    """Load the OS items of an AgentBench checkout.

    Args:
        data_dir: the checkout's ``data/`` folder (or its ``os_interaction`` folder).
        splits: ``"dev"`` and/or ``"test"``.
        problems: when given, an item (or file) that does not convert is appended here and
            the rest still load; when None, the first one raises.

    Returns:
        The tasks, dev first, then test folders in numeric order, files sorted by name.

    Raises:
        TaskFileError: the folder has no ``os_interaction`` data, or an item does not validate
            (the message names the file, the task id and the field).
        ConfigError: an unknown split name.
    """
    wanted = tuple(splits)
    unknown = sorted(set(wanted) - set(SPLITS))
    if unknown:
        raise ConfigError(f"unknown AgentBench OS split(s) {unknown}; use 'dev' and/or 'test'.")
    root = _os_root(Path(data_dir))
    tasks: list[OSTask] = []
    if "dev" in wanted:
        dev = root / "data" / "dev.json"
        if dev.is_file():
            tasks.extend(_load_file(dev, prefix="dev-001", script_dir=root / "scripts" / "dev", problems=problems))
    if "test" in wanted:
        data = root / "data"
        folders = sorted((p for p in data.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
        for folder in folders:
            prefix = f"std-{int(folder.name):03d}"
            for file in sorted(folder.glob("*.json")):
                tasks.extend(_load_file(file, prefix=prefix, script_dir=root / "scripts" / folder.name,
                                        problems=problems))
    return tasks


def _os_root(data_dir: Path) -> Path:
    for candidate in (data_dir / "os_interaction", data_dir):
        data = candidate / "data"
        if data.is_dir() and ((data / "dev.json").is_file() or any(p.name.isdigit() for p in data.iterdir())):
            return candidate
    raise TaskFileError(
        str(data_dir),
        "no AgentBench OS data here: expected os_interaction/data/ (dev.json and numbered folders). "
        "Pass the data/ folder of an AgentBench checkout.",
    )


def _read_items(path: Path) -> list[Any]:
    text = read_task_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # JSON Lines: one object per non-empty line.
        data = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TaskFileError(str(path), f"neither JSON nor JSON Lines (line {number}: {exc}).") from exc
    return data if isinstance(data, list) else [data]


def _load_file(path: Path, *, prefix: str, script_dir: Path, problems: list[LoadProblem] | None) -> list[OSTask]:
    try:
        items = _read_items(path)
    except TaskFileError as exc:
        if problems is None:
            raise
        problems.append(LoadProblem(exc.path, exc.message))
        return []
    tasks: list[OSTask] = []
    for index, item in enumerate(items):
        task_id = f"{prefix}-{path.stem}-{index:05d}"
        try:
            if not isinstance(item, dict):
                raise TaskFileError(str(path), f"item {index} is a {type(item).__name__}, expected an object.",
                                    task_id=task_id)
            converted = convert_item(item, task_id=task_id, script_dir=script_dir, source=f"{path}#{index}")
            converted["split"] = "dev" if prefix.startswith("dev") else "test"  # AgentBench's os-dev / os-std
            tasks.extend(parse_tasks([converted], OSTask, path=str(path), first_index=index))
        except TaskFileError as exc:
            if problems is None:
                raise
            problems.append(LoadProblem(f"{path}#{index}", exc.message, task_id, exc.field))
    return tasks


def _single_file(path: Path) -> tuple[Path, str, Path] | None:
    """``(file, id prefix, script folder)`` when ``path`` is one problem file of AgentBench's OS
    data (``os_interaction/data/dev.json`` or ``os_interaction/data/<N>/<name>.json``), with
    the ``scripts`` folder beside ``data``, as AgentBench's configs pair them."""
    if not path.is_file() or path.suffix != ".json":
        return None
    if path.parent.name == "data" and path.stem == "dev":
        root = path.parent.parent
        prefix, scripts = "dev-001", root / "scripts" / "dev"
    elif path.parent.name.isdigit() and path.parent.parent.name == "data":
        root = path.parent.parent.parent
        prefix, scripts = f"std-{int(path.parent.name):03d}", root / "scripts" / path.parent.name
    else:
        return None
    return (path, prefix, scripts) if (root / "scripts").is_dir() else None


def is_agentbench_os(path: Path) -> bool:
    """Whether ``path`` is an AgentBench checkout's ``data/`` (or ``os_interaction``) folder, or
    one of its problem files (``os_interaction/data/dev.json``, ``os_interaction/data/1/*.json``)."""
    if _single_file(path) is not None:
        return True
    if not path.is_dir():
        return False
    try:
        _os_root(path)
    except (TaskFileError, OSError):
        return False
    return True


def collect_agentbench_os(path: Path) -> LoadResult:
    """Every split of an AgentBench OS folder (or the one problem file given); an item that does
    not convert is a problem, not a stop.

    Raises:
        TaskFileError: ``path`` holds no AgentBench OS data.
    """
    problems: list[LoadProblem] = []
    single = _single_file(path)
    if single is not None:
        file, prefix, scripts = single
        tasks = _load_file(file, prefix=prefix, script_dir=scripts, problems=problems)
    else:
        tasks = load_agentbench_os(path, problems=problems)
    return LoadResult(tuple(tasks), tuple(problems))


def convert_item(item: dict[str, Any], *, task_id: str, script_dir: Path | str, source: str) -> dict[str, Any]:
    """Map one AgentBench OS item to the fields of :class:`OSTask` (validated by the caller)."""
    create = item.get("create")
    image: Any = "default"
    init: Any = []
    if isinstance(create, dict):
        image = create.get("local") or "default"
        init = create.get("init") or []
    # A malformed create (a list) occurs in the public data: default image, no init.
    evaluation = item.get("evaluation")
    task: dict[str, Any] = {
        "id": task_id,
        "instruction": item.get("description"),
        "image": image,
        "init": _scripts(init),
        "evaluation": _evaluation(evaluation),
        "script_dir": str(script_dir),
        "source": source,
    }
    labels = item.get("labels")
    if isinstance(labels, list):
        task["labels"] = [str(x) for x in labels]
        if labels:
            task["category"] = str(labels[0])
    if item.get("start") is not None:
        task["start"] = _script(item["start"])
    needs = _network_needs(task, item, script_dir)
    if needs:
        task["needs_network"] = True
        task["network_note"] = needs
    switches = _user_switches(task, item, script_dir)
    if switches:
        task["needs_users"] = True
        task["users_note"] = f"acts as another user ({switches})"
    if isinstance(evaluation, dict):
        match = task["evaluation"].get("match")
        answer = match.get("answer") if isinstance(match, dict) else match
        if isinstance(answer, str):
            task["reference_solution"] = [{"answer": answer}]
        elif task["evaluation"].get("check") is not None and task["evaluation"].get("example") is not None:
            task["reference_solution"] = _replay_example(task["evaluation"], script_dir, task_id, source)
    return task


def _network_needs(task: dict[str, Any], item: dict[str, Any], script_dir: Path | str) -> str | None:
    """What of the item's init, start and example scripts needs the network (see
    :mod:`agentunit_gym.domains.os.network`), e.g. ``"init: apt update, apt install"``; None
    when nothing does."""
    return _scan_scripts(task, item, script_dir, network_commands, checks=False)


def _user_switches(task: dict[str, Any], item: dict[str, Any], script_dir: Path | str) -> str | None:
    """What of the item's init, start, example and check scripts acts as another user (see
    :mod:`agentunit_gym.domains.os.users`), e.g. ``"start: su"``; None when nothing does."""
    return _scan_scripts(task, item, script_dir, user_commands, checks=True)


def _scan_scripts(task: dict[str, Any], item: dict[str, Any], script_dir: Path | str,
                  detect: Callable[[str, str], list[str]], *, checks: bool) -> str | None:
    """``detect`` over the item's scripts, as ``"init: a, b; example: c"``; None when it finds
    nothing. A script that does not validate or read (or a builtin check) is skipped here:
    validation reports it."""
    evaluation = item.get("evaluation")
    example = evaluation.get("example") if isinstance(evaluation, dict) else None
    check = task["evaluation"].get("check") if checks and isinstance(task.get("evaluation"), dict) else None
    groups = (("init", task["init"]), ("start", [task["start"]] if "start" in task else []),
              ("example", [_script(example)] if example is not None else []),
              ("check", [c for c in check or [] if c is not None]))
    parts = []
    for where, scripts in groups:
        found: list[str] = []
        for raw in scripts:
            try:
                script = Script.model_validate(raw)
                code = script.source(str(script_dir))
            except (ValidationError, TaskFileError):
                continue
            found += [c for c in detect(code, script.language) if c not in found]
        if found:
            parts.append(f"{where}: {', '.join(found)}")
    return "; ".join(parts) or None


def _replay_example(evaluation: dict[str, Any], script_dir: Path | str, task_id: str,
                    source: str) -> list[dict[str, Any]]:
    """The reference of a check item, as AgentBench grades it: run the example script (its
    gold solution) in the agent's shell; answer with its output when the check compares
    the answer with the example's output (a script follows a ``null`` entry) or a check
    script reads the answer itself (its first argument), else finish.

    The example runs in a child process of the agent's shell (``bash -c`` / ``python3 -c``,
    stdin closed), as AgentBench runs it for the check, so an ``exit`` in it cannot end the
    shell; it still sees the shell's user, directory and environment.

    Raises:
        TaskFileError: the example is not a script object, or its file cannot be read.
    """
    try:
        example = Script.model_validate(evaluation["example"])
    except ValidationError as exc:
        raise TaskFileError(source, f"the example script is not valid ({exc.errors()[0]['msg']}).",
                            task_id=task_id, field="evaluation.example") from exc
    code = example.source(str(script_dir))
    runner = "python3" if example.language == "python" else "bash"
    steps: list[dict[str, Any]] = [{"bash": f"{runner} -c {shlex.quote(code)} < /dev/null"}]
    check = evaluation["check"]
    compares_output = any(entry is None for entry in check[:-1])
    reads_answer = any(_reads_answer(entry, script_dir) for entry in check if entry is not None)
    steps.append({"tool": "answer", "from_output": True} if compares_output or reads_answer else {"tool": "finish"})
    return steps


_PYTHON_ANSWER = re.compile(r"argv\s*\[\s*1\s*[\]:]")
_BASH_ANSWER = re.compile(r"\$(?:1(?!\d)|\{1\}|@|\*)")


def _reads_answer(entry: Any, script_dir: Path | str) -> bool:
    """Whether a check script reads the agent's answer: AgentBench passes it as every check
    script's first argument (``argv[1]``, ``$1``), so an item whose check reads it wants an
    answer even without a ``null`` (example) entry (``std-004-Q47-00000``: "tell me the path"
    beside a move). A script that cannot be read counts as not reading it."""
    try:
        script = Script.model_validate(entry)
        code = script.source(str(script_dir))
    except (ValidationError, TaskFileError, OSError, ValueError):
        return False
    pattern = _PYTHON_ANSWER if script.language == "python" else _BASH_ANSWER
    return pattern.search(code) is not None


def _script(script: Any) -> Any:
    if isinstance(script, dict):
        # Keep the fields a script object has; AgentBench items carry no others we use.
        return {k: v for k, v in script.items() if k in ("code", "file", "language")}
    return script


def _scripts(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return [_script(s) for s in value]
    return [_script(value)]


def _evaluation(evaluation: Any) -> Any:
    if not isinstance(evaluation, dict):
        return evaluation  # validation reports it, naming the field
    out: dict[str, Any] = {}
    if "match" in evaluation:
        match = evaluation["match"]
        if isinstance(match, dict):
            match = {k: v for k, v in match.items() if k in ("answer", "regex", "strip")}
        out["match"] = match
    if "check" in evaluation:
        check = evaluation["check"]
        items = check if isinstance(check, list) else [check]
        out["check"] = [None if s is None else _script(s) for s in items]
    if evaluation.get("example") is not None:
        out["example"] = _script(evaluation["example"])
    return out
