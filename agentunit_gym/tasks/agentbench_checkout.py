"""Read AgentBench's prompt text from the user's AgentBench checkout, at run time.

AgentBench writes each domain's instructions, the model's acknowledgement and the one-shot
example as Python literals in its task modules (``src/server/tasks/<task>/...``), and glues
the task's own text in with a few string pieces. Under ``eval --protocol agentbench`` with a
checkout (``--agentbench-root``, or found above a ``--tasks`` path) the chat agent's
conversation is built from that text, so none of it is copied into this package.

The modules are parsed, never imported or run: :class:`TaskModule` reads module-level
literals (``ast.literal_eval``), the messages a function passes to ``<session>.inject({...})``
and the pieces a function appends with ``<...>.content += ...``, as :class:`Template` s whose
non-literal parts (the task's question, the page) are numbered :class:`Slot` s.

Example (not run: it needs an AgentBench checkout)::

    root = find_checkout(Path("AgentBench/data/knowledgegraph/std.json"))
    module = TaskModule(root, "knowledgegraph/task.py")
    module.constant("INSTRUCTIONS")                 # the instructions text
    module.injected("start_sample")[-1].content      # Template("A new question: ", Slot(0), ...)
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentunit_gym.errors import AgentBenchCheckoutError

TASKS_DIR = Path("src/server/tasks")
"""Where an AgentBench checkout keeps its task modules."""


def is_checkout(path: Path) -> bool:
    """Whether ``path`` is the top folder of an AgentBench checkout (it holds ``src/server/tasks``)."""
    return (path / TASKS_DIR).is_dir()


def find_checkout(start: str | Path) -> Path | None:
    """The AgentBench checkout ``start`` lies in (a data file or folder inside it), None when none.

    Walks up from ``start`` to the first folder that holds ``src/server/tasks``.
    """
    path = Path(start).resolve()
    for folder in (path, *path.parents):
        if is_checkout(folder):
            return folder
    return None


def resolve_checkout(root: str | Path | None, task_paths: Sequence[str | Path] = ()) -> Path | None:
    """The checkout a run reads AgentBench's prompts from.

    Args:
        root: ``--agentbench-root`` (the checkout's top folder), None when not given.
        task_paths: the ``--tasks`` paths; the first one inside a checkout names it when
            ``root`` is None.

    Returns:
        The checkout's absolute path, None when there is none.

    Raises:
        AgentBenchCheckoutError: ``root`` is not an AgentBench checkout.
    """
    if root is not None:
        path = Path(root).resolve()
        if not is_checkout(path):
            raise AgentBenchCheckoutError(
                f"--agentbench-root {root}: expected the top folder of an AgentBench checkout (one holding "
                f"{TASKS_DIR}), found none there. Give the folder `git clone https://github.com/THUDM/AgentBench` "
                "made, or leave the option out to use agentunit-gym's own prompts.")
        return path
    for task_path in task_paths:
        found = find_checkout(task_path)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Slot:
    """A non-literal part of a :class:`Template` (the task's question, a page), numbered from 0."""

    index: int


@dataclass(frozen=True)
class Template:
    """A message text made of literal pieces and :class:`Slot` s, in order."""

    parts: tuple[str | Slot, ...]

    @property
    def slots(self) -> int:
        """How many slots the template has."""
        return sum(isinstance(p, Slot) for p in self.parts)

    @property
    def literal(self) -> str | None:
        """The text when the template has no slot, else None."""
        return None if self.slots else "".join(str(p) for p in self.parts)

    def fill(self, *values: str) -> str:
        """The text with slot ``k`` replaced by ``values[k]``.

        Raises:
            AgentBenchCheckoutError: not one value per slot.
        """
        if len(values) != self.slots:
            raise AgentBenchCheckoutError(
                f"an AgentBench message template has {self.slots} slot(s), {len(values)} value(s) were given: "
                f"{self!r}. The checkout's task module is not laid out as this version of agentunit-gym reads it.")
        return "".join(values[p.index] if isinstance(p, Slot) else p for p in self.parts)


@dataclass(frozen=True)
class Injected:
    """One ``<session>.inject({"role": ..., "content": ...})`` call of a task function."""

    role: str | None
    """The literal role (``user``, ``agent``), None when it is not a literal."""
    content: Template


class TaskModule:
    """One Python module of an AgentBench checkout, parsed (never imported).

    Args:
        root: the checkout's top folder.
        relative: the module's path under ``src/server/tasks`` (``knowledgegraph/task.py``).

    Raises:
        AgentBenchCheckoutError: the file is missing or is not Python this interpreter parses.
    """

    def __init__(self, root: Path, relative: str) -> None:
        self.path = root / TASKS_DIR / relative
        try:
            source = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AgentBenchCheckoutError(
                f"{self.path}: cannot read it ({exc.strerror or exc}). --protocol agentbench reads AgentBench's "
                "prompts from the text-protocol release's task modules (v0.2, src/server/tasks/...); check out that "
                "release, or leave --agentbench-root out to use agentunit-gym's own prompts.") from None
        try:
            self.tree = ast.parse(source, filename=str(self.path))
        except SyntaxError as exc:
            raise AgentBenchCheckoutError(f"{self.path}: not valid Python ({exc.msg}, line {exc.lineno}).") from None
        self._constants: dict[str, ast.expr] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self._constants[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self._constants[node.target.id] = node.value

    def missing(self, what: str) -> AgentBenchCheckoutError:
        return AgentBenchCheckoutError(
            f"{self.path}: {what} not found. agentunit-gym reads the text-protocol release of AgentBench (v0.2); "
            "this checkout's task module is laid out otherwise. Check out that release, or leave --agentbench-root "
            "out to use agentunit-gym's own prompts.")

    def constant(self, name: str) -> Any:
        """The value of the module-level literal ``name`` (a string, a list of strings or dicts ...).

        Raises:
            AgentBenchCheckoutError: no such assignment, or its value is not a literal.
        """
        node = self._constants.get(name)
        if node is None:
            raise self.missing(f"the module-level literal {name}")
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise self.missing(f"a literal value of {name}") from None

    def function(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """The first function or method named ``name`` in the module.

        Raises:
            AgentBenchCheckoutError: no such function.
        """
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        raise self.missing(f"the function {name}()")

    def injected(self, function: str) -> list[Injected]:
        """Every ``X.inject({...})`` call with a dict literal in ``function``, in source order.

        A local name assigned once in ``function`` (``prompt = a + "\\n" + b``) is read through
        its assignment; other names are slots."""
        body = self.function(function)
        local = _single_assignments(body)
        found: list[tuple[int, int, Injected]] = []
        for node in ast.walk(body):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "inject" and len(node.args) == 1 and isinstance(node.args[0], ast.Dict)):
                continue
            fields = {k.value: v for k, v in zip(node.args[0].keys, node.args[0].values, strict=True)
                      if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if "content" not in fields:
                continue
            role = fields.get("role")
            role_text = role.value if isinstance(role, ast.Constant) and isinstance(role.value, str) else None
            found.append((node.lineno, node.col_offset, Injected(role_text, self.template(fields["content"], local))))
        return [item for _, _, item in sorted(found, key=lambda f: (f[0], f[1]))]

    def appended(self, function: str) -> list[Template]:
        """Every ``<...>.content += EXPR`` in ``function``, in source order, as templates of ``EXPR``."""
        found = [node for node in ast.walk(self.function(function))
                 if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
                 and isinstance(node.target, ast.Attribute) and node.target.attr == "content"]
        return [self.template(node.value) for node in sorted(found, key=lambda n: (n.lineno, n.col_offset))]

    def template(self, node: ast.expr, local: dict[str, ast.expr] | None = None) -> Template:
        """``node`` as a template: string literals (and names of module-level ones, or of ``local``
        assignments) kept, sums and f-strings flattened, anything else a slot."""
        parts: list[str | Slot] = []
        self._flatten(node, parts, local or {})
        numbered: list[str | Slot] = []
        count = 0
        for part in parts:
            if isinstance(part, Slot):
                numbered.append(Slot(count))
                count += 1
            else:
                numbered.append(part)
        return Template(tuple(numbered))

    def _flatten(self, node: ast.expr, parts: list[str | Slot], local: dict[str, ast.expr]) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            self._flatten(node.left, parts, local)
            self._flatten(node.right, parts, local)
        elif isinstance(node, ast.Name) and node.id in local:
            self._flatten(local[node.id], parts, {k: v for k, v in local.items() if k != node.id})
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                else:
                    parts.append(Slot(-1))
        elif (isinstance(node, ast.Name) and isinstance(known := self._constants.get(node.id), ast.Constant)
              and isinstance(known.value, str)):
            parts.append(known.value)
        else:
            parts.append(Slot(-1))


def _single_assignments(function: ast.AST) -> dict[str, ast.expr]:
    """The names assigned exactly once in ``function`` (plain ``name = value``), with their values.

    Every binding counts: unpacking (``page, reward = env.step(a)``, as AgentBench's loops do),
    ``for`` and ``with`` targets, augmented and annotated assignments, ``:=``. A name bound more
    than once holds more than one value, so it is a slot, not its first value."""
    values: dict[str, ast.expr] = {}
    counts: dict[str, int] = {}
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for target in targets:
            for name in _bound_names(target):
                counts[name] = counts.get(name, 0) + 1
            if isinstance(node, ast.Assign) and isinstance(target, ast.Name):
                values[target.id] = node.value
    return {name: value for name, value in values.items() if counts[name] == 1}


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``); none for ``x.y`` or ``x[i]``."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


__all__ = ["TASKS_DIR", "Injected", "Slot", "TaskModule", "Template", "find_checkout", "is_checkout",
           "resolve_checkout"]
