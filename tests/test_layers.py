"""Imports only point down the layers of ``agentunit_gym.layers.LAYERS`` (the README's "Layout").

Every module's whole syntax tree is read, so an import inside a function or under
``TYPE_CHECKING`` counts as much as one at the top, and so does a ``"agentunit_gym.x.y:Attr"``
string outside a docstring (an entry point or a lazy import target names its module as surely
as an import does). A domain's folder imports no other domain's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentunit_gym.layers import LAYERS, Layer, layer_of, rank

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agentunit_gym"
_TARGET = re.compile(r"agentunit_gym(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?")

ALLOWED: dict[tuple[str, str], str] = {
    ("core/registry.py", "agentunit_gym.domains"):
        "the entry-point group's name, and the scan that finds the built-in domains when an editable "
        "install's metadata predates the group (tests/core/test_domain.py); the registry is where "
        "domains are found, so it names the folder they live in",
    ("images/webshop/serve.py", "agentunit_gym.backends.shop.server"):
        "the webshop image's launcher runs the shop server from the package mounted into the container; "
        "giving it the module in the container's command instead changes the image (a rebuild)",
}
"""Upward references allowed, each with its reason: ``(module path, referenced module)``."""


def _module_name(path: Path) -> str:
    parts = ("agentunit_gym", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for before, after in zip([None, *body], body, strict=False):
            is_doc = before is None and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                          ast.AsyncFunctionDef))
            is_attr_doc = isinstance(before, (ast.Assign, ast.AnnAssign))
            if (is_doc or is_attr_doc) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                found.add(id(after.value))
    return found


def _submodule_or_root(name: str) -> str:
    exists = (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()
    return f"agentunit_gym.{name}" if exists else "agentunit_gym"


def references(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every package module ``path`` imports or names as a target."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    prose = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module == "agentunit_gym":  # `from agentunit_gym import errors` imports a submodule
                found += [(node.lineno, _submodule_or_root(alias.name)) for alias in node.names]
            else:
                found.append((node.lineno, module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if _TARGET.fullmatch(node.value):
                found.append((node.lineno, node.value.partition(":")[0]))
    return [(line, module) for line, module in found
            if module == "agentunit_gym" or module.startswith("agentunit_gym.")]


def _holder(module: str) -> Layer | None:
    try:
        return layer_of(module)
    except KeyError:
        return None  # a label such as "agentunit_gym.role", not a module


def wrong_way(path: Path) -> list[str]:
    """The references of ``path`` that point up a layer or across to another domain."""
    relative = path.relative_to(PACKAGE).as_posix()
    name = _module_name(path)
    mine = layer_of(name)
    out: list[str] = []
    for line, target in references(path):
        theirs = _holder(target)
        if theirs is None or (relative, target) in ALLOWED:
            continue
        if rank(theirs) < rank(mine):
            out.append(f"{relative}:{line}: {mine.name} -> {theirs.name} ({target})")
        elif theirs is mine and mine.separate_children:
            own, other = name.split(".")[2:3], target.split(".")[2:3]
            if own and other and own != other:
                out.append(f"{relative}:{line}: {name} -> {target} (another {mine.name} folder)")
    return out


def test_every_module_is_in_one_layer() -> None:
    parts = [part for layer in LAYERS for part in layer.parts]
    assert len(parts) == len(set(parts))
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_file() and p.suffix == ".py") or (p.is_dir() and not p.name.startswith(("_", ".")))}
    assert tops - set(parts) == set(), "give these folders a layer in agentunit_gym/layers.py"
    assert set(parts) - tops == set(), "these layers' parts no longer exist"


def test_the_check_finds_a_wrong_way_import(tmp_path: Path) -> None:
    # Guard against a vacuous pass: upward imports at the top, in a function, by a relative
    # import and by an entry-point string are all caught; a downward one and a label are not.
    module = PACKAGE / "core" / "_probe_for_test_layers.py"
    module.write_text(
        "from agentunit_gym.errors import ConfigError\n"
        "from agentunit_gym.eval import summary\n"
        "def f():\n"
        "    import agentunit_gym.wrappers.base\n"
        "    from ..serve import remote\n"
        "TARGET = 'agentunit_gym.cli.main:main'\n"
        "LABEL = 'agentunit_gym.role'\n"
        "def g():\n"
        "    '''agentunit_gym.cli.main:main in a docstring is prose.'''\n",
        encoding="utf-8")
    try:
        found = wrong_way(module)
    finally:
        module.unlink()
    assert found == [
        "core/_probe_for_test_layers.py:2: core -> eval (agentunit_gym.eval)",
        "core/_probe_for_test_layers.py:4: core -> wrappers (agentunit_gym.wrappers.base)",
        "core/_probe_for_test_layers.py:5: core -> serve (agentunit_gym.serve)",
        "core/_probe_for_test_layers.py:6: core -> cli (agentunit_gym.cli.main)",
    ]


def test_a_domain_importing_another_domain_is_caught() -> None:
    module = PACKAGE / "domains" / "os" / "_probe_for_test_layers.py"
    module.write_text("def f():\n    from agentunit_gym.domains.db import DOMAIN\n"
                      "from agentunit_gym.domains.os.domain import DOMAIN\n", encoding="utf-8")
    try:
        found = wrong_way(module)
    finally:
        module.unlink()
    assert found == ["domains/os/_probe_for_test_layers.py:2: agentunit_gym.domains.os._probe_for_test_layers "
                     "-> agentunit_gym.domains.db (another domains folder)"]


@pytest.mark.parametrize("layer", [layer.name for layer in LAYERS])
def test_imports_point_down(layer: str) -> None:
    found = [f for path in sorted(PACKAGE.rglob("*.py")) if layer_of(_module_name(path)).name == layer
             for f in wrong_way(path)]
    assert found == [], "imports that point up the layers (agentunit_gym/layers.py):\n" + "\n".join(found)


def test_the_allowances_are_still_needed() -> None:
    for (relative, target), _reason in ALLOWED.items():
        assert target in {m for _, m in references(PACKAGE / relative)}, f"drop the allowance of {relative}"


def test_the_readme_layout_lists_the_layers_in_order() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    listed = re.findall(r"^  (\w+)(?:/|\.py)", block, flags=re.MULTILINE)
    folders = [part for layer in LAYERS for part in layer.parts if not part.startswith("__") and part != "layers"]
    assert listed == folders
