"""The adapters import their trainer's library lazily, and say how to install it when it is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE_DEADLINE_S = 120


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PROBE_DEADLINE_S)


def test_importing_the_package_imports_no_trainer() -> None:
    libraries = ('skyrl_gym', 'verifiers', 'inspect_ai')
    result = _python("import sys, agentunit_gym, agentunit_gym.integrations, agentunit_gym.wrappers, "
                     f"agentunit_gym.eval; print(sorted(m for m in {libraries!r} if m in sys.modules))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("agentunit_gym.integrations.skyrl", "skyrl_gym", "integrations"),
    ("agentunit_gym.integrations.verifiers", "verifiers", "integrations"),
    ("agentunit_gym.integrations.inspect", "inspect_ai", "inspect"),
])
def test_a_missing_trainer_library_raises_missing_dependency_with_the_pip_line(module: str, blocked: str,
                                                                              extra: str) -> None:
    # sys.modules[name] = None makes `import name` raise ImportError, as when it is not installed.
    result = _python(f"import sys; sys.modules[{blocked!r}] = None\n"
                     "from agentunit_gym.errors import MissingDependencyError\n"
                     f"try:\n    import {module}\n"
                     "except MissingDependencyError as exc:\n    print(type(exc).__name__, exc.extra, str(exc))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"MissingDependencyError {extra} ")
    assert f'pip install "agentunit-gym[{extra}]"' in result.stdout
