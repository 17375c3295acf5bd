"""Nothing outside ``agentunit_gym/domains/`` names a domain's specifics.

Code outside a domain's folder reads the registered descriptions instead (see
docs/domains.md). This test reads every module's syntax tree (docstrings and comments are
prose, and may give examples) and fails on:

- an import of a domain package (``agentunit_gym.domains.<name>``);
- a string constant that is a registered domain's name, contains one of its env ids (full
  or short), or is one of its backend names; the backend packages (``backends/``, which
  implement those engines) and ``images/`` may name their own engines.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentunit_gym.core.registry import domains

PACKAGE = Path(__file__).resolve().parents[2] / "agentunit_gym"

TRANSITIONAL: dict[str, str] = {}
"""Files allowed to name domains for now, and why (each entry is a debt with a plan): none."""


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # Attribute docstrings: a bare string right after an assignment.
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, after in zip(body, body[1:], strict=False):
                if isinstance(before, (ast.Assign, ast.AnnAssign)) and isinstance(after, ast.Expr) \
                        and isinstance(after.value, ast.Constant):
                    ids.add(id(after.value))
    return ids


def _findings(path: Path, relative: str) -> list[str]:
    registered = domains()
    names = {d.name for d in registered}
    env_ids = {e for d in registered for spec in d.envs for e in (spec.id, spec.short_id)}
    backend_names = {b for d in registered for b in d.backend_names}
    engine_code = relative.startswith(("backends/", "images/"))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    prose = _docstring_nodes(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agentunit_gym.domains."):
            out.append(f"{relative}:{node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import):
            out += [f"{relative}:{node.lineno}: imports {a.name}" for a in node.names
                    if a.name.startswith("agentunit_gym.domains.")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            text = node.value
            if text in names and not engine_code:
                out.append(f"{relative}:{node.lineno}: names domain {text!r}")
            elif any(e in text for e in env_ids):
                out.append(f"{relative}:{node.lineno}: names an env id in {text[:60]!r}")
            elif text in backend_names and not engine_code:
                out.append(f"{relative}:{node.lineno}: names backend {text!r}")
    return out


def test_the_check_sees_the_domains_it_looks_for() -> None:
    # Guard against a vacuous pass: the registry has the built-in domains, and the check
    # finds their specifics inside their own folders.
    assert {"os", "db"} <= {d.name for d in domains()}
    inside = [f for p in sorted((PACKAGE / "domains").rglob("*.py"))
              for f in _findings(p, str(p.relative_to(PACKAGE)))]
    assert any("names domain" in f for f in inside) and any("env id" in f for f in inside)


def test_nothing_outside_domains_names_a_domain() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE))
        if relative.startswith("domains/") or relative in TRANSITIONAL:
            continue
        found += _findings(path, relative)
    assert found == [], "\n".join(found)
