"""The one seam for processes and daemons: what it says about the machine."""

from __future__ import annotations

import pytest

from agentunit_gym.backends import process


def test_the_auto_backends_say_why_docker_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the docker SDK a running daemon cannot be used: the note names the extra, not a dead daemon."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "docker" else real(name, *a))
    assert process.docker_absence() == 'the docker SDK is not installed: pip install "agentunit-gym[docker]"'
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert process.docker_absence() == "no Docker daemon answers"


def _process_calls() -> dict[str, set[str]]:
    """Each module's functions that call ``subprocess``/``os`` process starters, by qualified name."""
    import ast
    from pathlib import Path

    package = Path(process.__file__).resolve().parents[1]
    starters = {
        "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
        "os": {"system", "popen", "spawnv", "spawnvp", "execv", "execvp", "execvpe", "posix_spawn", "posix_spawnp"},
        "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    }
    found: dict[str, set[str]] = {}

    def visit(node: ast.AST, scope: list[str], module: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = [*scope, child.name]
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and isinstance(child.func.value, ast.Name)
                    and child.func.attr in starters.get(child.func.value.id, ())):
                found.setdefault(module, set()).add(".".join(scope) or "<module>")
            visit(child, inner, module)

    for path in package.rglob("*.py"):
        module = str(path.relative_to(package.parent))
        visit(ast.parse(path.read_text(encoding="utf-8")), [], module)
    return found


def test_processes_start_only_where_the_seam_says() -> None:
    """backends/process.py's docstring lists the places that start processes themselves; a new one
    fails here (route it through process.run, or add it to that list with the reason)."""
    assert _process_calls() == {
        "agentunit_gym/backends/process.py": {"_run"},
        "agentunit_gym/backends/sandbox/local/box.py": {"_Boxes.spawn"},
        "agentunit_gym/backends/sandbox/local/spawner_main.py": {"_become", "_Spawner._start_direct"},
        "agentunit_gym/backends/sandbox/usermap.py": {"_probe"},
        "agentunit_gym/images/os/supervisor.py": {"Shell.__init__", "run_once"},
    }
