"""Sandbox kinds are registered like domains: the ``agentunit_gym.sandboxes`` entry points.

The built-ins come through the group (pyproject.toml) and the OS domain offers every registered
kind. A third-party kind, a package written here and installed (``uv pip install --target``) into a folder of its own
(never into the shared environment), runs OS-v0 episodes through ``gym.make(..., backend=...)``
in a fresh interpreter that sees that folder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tomllib

from agentunit_gym.backends.sandbox import factory, kinds
from agentunit_gym.backends.sandbox.kinds import SandboxKind
from agentunit_gym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


class _EntryPoint:
    def __init__(self, name: str, value: str) -> None:
        self.name, self.value = name, value


@pytest.fixture
def entries(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the registry see the real entries plus the given ones; forget them afterwards."""
    real = kinds.metadata.entry_points

    def install(*extra: tuple[str, str]) -> None:
        monkeypatch.setattr(kinds.metadata, "entry_points",
                            lambda group: [*real(group=group), *(_EntryPoint(n, v) for n, v in extra)])
        kinds.reload()

    yield install
    monkeypatch.undo()
    kinds.reload()


GHOST = SandboxKind("ghost", "a second embedded kind", sandbox="agentunit_gym.backends.sandbox.local:LocalSandbox",
                    embedded=True)
MISNAMED = SandboxKind("misnamed", "a kind whose class says it is local",
                       sandbox="agentunit_gym.backends.sandbox.local:LocalSandbox")


def test_pyproject_registers_the_built_ins_the_fallback_knows() -> None:
    # The fallback (an install whose metadata predates the group) and the real registration agree.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["entry-points"][kinds.ENTRY_POINT_GROUP]
    assert declared == {"docker": "agentunit_gym.backends.sandbox.kinds:DOCKER",
                        "local": "agentunit_gym.backends.sandbox.kinds:LOCAL"}
    assert {name: f"{kinds.__name__}:{attr}" for attr, kind in kinds._BUILTINS.items()
            for name in [kind.name]} == declared


def test_the_built_ins_and_the_os_domain_offer_them() -> None:
    from agentunit_gym.core.registry import get_domain

    assert kinds.kind_names()[:2] == ("docker", "local") and kinds.broken_kinds() == ()
    assert kinds.embedded_kind().name == "local"
    assert [k.name for k in kinds.kinds() if k.needs_docker] == ["docker"]
    os_domain = get_domain("os")
    assert os_domain.backend_names == kinds.kind_names()
    assert os_domain.embedded_backend.name == "local"
    assert os_domain.backend("docker").needs_docker
    assert factory.KINDS == ("auto", *kinds.kind_names())


def test_broken_entries_are_set_aside_with_their_reason(entries: Any) -> None:
    entries(("nothere", "no_such_module_xyz:KIND"), ("notakind", "agentunit_gym.errors:ConfigError"),
            ("ghost", "tests.backends.test_sandbox_kinds:GHOST"), ("other", "tests.backends.test_sandbox_kinds:GHOST"))
    broken = {b.name: b.reason for b in kinds.broken_kinds()}
    assert "does not load" in broken["nothere"]
    assert "not an agentunit_gym SandboxKind" in broken["notakind"]
    assert "'local' is the embedded default" in broken["ghost"]
    assert "declares the name 'ghost'" in broken["other"]
    assert kinds.kind_names()[:2] == ("docker", "local") and "ghost" not in kinds.kind_names()
    with pytest.raises(ConfigError, match="does not load"):
        factory.open_sandbox("nothere")
    with pytest.raises(ConfigError, match="unknown sandbox kind 'podman'.*docker, local"):
        factory.resolve_kind("podman")


def test_a_kind_whose_class_names_another_kind_is_refused(entries: Any) -> None:
    entries(("misnamed", "tests.backends.test_sandbox_kinds:MISNAMED"))
    assert "misnamed" in kinds.kind_names()
    with pytest.raises(ConfigError, match="kind is 'local'; set the class attribute kind = 'misnamed'"):
        factory.open_sandbox("misnamed")


def test_a_kind_is_checked_when_declared() -> None:
    with pytest.raises(ConfigError, match="lower-case identifier"):
        SandboxKind("Auto", "x", sandbox="m:C")
    with pytest.raises(ConfigError, match="other than 'auto'"):
        SandboxKind("auto", "x", sandbox="m:C")
    with pytest.raises(ConfigError, match="must be 'module:Class'"):
        SandboxKind("mine", "x", sandbox="m.C")


# --------------------------------------------------------------- a third party's kind, installed

PACKAGE_FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "traced-sandbox"
        version = "0.1.0"
        dependencies = ["agentunit-gym"]

        [project.entry-points."agentunit_gym.sandboxes"]
        traced = "traced_sandbox:KIND"

        [tool.setuptools]
        packages = ["traced_sandbox"]
        """,
    "traced_sandbox/__init__.py": """
        from agentunit_gym.backends.sandbox.kinds import SandboxKind

        KIND = SandboxKind("traced", "the local sandbox, every agent command written to a log",
                           sandbox="traced_sandbox.box:TracedSandbox")
        """,
    "traced_sandbox/box.py": """
        from agentunit_gym.backends.sandbox.local import LocalSandbox


        class TracedSandbox(LocalSandbox):
            kind = "traced"

            def __init__(self, *, log, **options):
                super().__init__(**options)
                self.log = log

            def shell(self, command, **kwargs):
                with open(self.log, "a", encoding="utf-8") as out:
                    out.write(command + "\\n")
                return super().shell(command, **kwargs)
        """,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sandbox_kind")
    source = root / "traced-sandbox"
    for name, text in PACKAGE_FILES.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    target = root / "site"
    from uv import find_uv_bin  # the `uv` wheel of the test extra (tests/test_extras.py): builds in seconds

    done = subprocess.run(
        [str(find_uv_bin()), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
         "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert any(p.name.startswith("traced_sandbox") and p.suffix == ".dist-info" for p in target.iterdir())
    return target


def _run(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": path}, cwd=site.parent)


def test_it_is_not_installed_in_the_shared_environment(site: Path) -> None:
    assert importlib.util.find_spec("traced_sandbox") is None
    assert "traced" not in kinds.kind_names()


def test_gym_make_runs_os_episodes_on_the_installed_kind(site: Path, tmp_path: Path) -> None:
    log = tmp_path / "commands.log"
    code = textwrap.dedent(f"""
        import json, pickle, gymnasium as gym, agentunit_gym
        from agentunit_gym.core.registry import get_domain

        out = {{"backends": list(get_domain("os").backend_names)}}
        with gym.make("AgentUnit/OS-v0", backend="traced", log={str(log)!r}) as env:
            obs, info = env.reset(seed=0, options={{"task_id": "os-files-count-logs"}})
            out["backend"] = info["backend"]
            out["kind"] = type(env.unwrapped.sandbox).__name__
            obs, reward, terminated, truncated, info = env.step(
                "Act: bash\\n```bash\\nfind /root/logs -type f -name '*.log' | wc -l\\n```")
            out["observation"] = obs
            obs, reward, terminated, truncated, info = env.step("Act: answer(6)")
            out["ended"] = [reward, terminated, info["finish_reason"].value]
            copy = pickle.loads(pickle.dumps(env.unwrapped))  # reopens its sandbox by the kind's name
            copy.reset(seed=0, options={{"task_id": "os-files-count-logs"}})
            copy.step("Act: bash\\n```bash\\necho from-the-copy\\n```")
            out["copy_kind"] = copy.sandbox.kind
            copy.close()
        print(json.dumps(out))
        """)
    done = _run(site, code)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["backends"] == ["docker", "local", "traced"]
    assert out["backend"] == "traced" and out["kind"] == "TracedSandbox" and out["copy_kind"] == "traced"
    assert "6" in out["observation"]
    assert out["ended"] == [1.0, True, "complete"]
    assert log.read_text(encoding="utf-8").splitlines() == [
        "find /root/logs -type f -name '*.log' | wc -l", "echo from-the-copy"]


def test_the_evaluator_runs_the_oracle_on_the_installed_kind(site: Path, tmp_path: Path) -> None:
    log, out = tmp_path / "commands.log", tmp_path / "run"
    code = ("import sys\nfrom agentunit_gym.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run(
        [sys.executable, "-c", code, "eval", "--env", "OS-v0", "--backend", "traced",
         "--env-option", f"OS-v0:log={log}", "--task-id", "os-files-count-logs", "--agent", "oracle",
         "--output", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(site), str(ROOT)))})
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert (record["task_id"], record["success"], record["backend"]) == ("os-files-count-logs", True, "traced")
    assert log.read_text(encoding="utf-8").splitlines() == ["find /root/logs -type f -name '*.log' | wc -l"]


def test_an_unknown_kind_names_the_installed_ones(site: Path) -> None:
    code = ("import gymnasium as gym, agentunit_gym\n"
            "try:\n    gym.make('AgentUnit/OS-v0', backend='podman')\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    done = _run(site, code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ConfigError") and "docker, local, traced" in done.stdout
