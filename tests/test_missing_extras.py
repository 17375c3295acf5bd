"""A missing optional dependency, met through the public API, is a ConfigError with the exact
``pip install "agentunit-gym[EXTRA]"`` line (MissingDependencyError), never a raw ImportError.

Each case hides the extra's modules (``sys.modules[name] = None`` makes their import raise
ImportError, as when they are not installed) and calls what a user would call.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401 - registers the envs
from agentunit_gym.errors import ConfigError, MissingDependencyError

ROOT = Path(__file__).resolve().parents[1]


def hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``import NAME`` (and of its submodules) fail for the rest of the test."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


def _make(env_id: str, **kwargs: Any) -> Callable[[], Any]:
    return lambda: gym.make(env_id, **kwargs)


def _mcp_server() -> Any:
    from agentunit_gym.serve.mcp_server import McpEpisodeServer

    return McpEpisodeServer(None, transport="stdio")  # type: ignore[arg-type]


def _env_server() -> Any:
    from agentunit_gym.serve.server import EnvServer, ServeConfig

    return EnvServer(ServeConfig(env="DB-v0", backend="sqlite"))


def _start_server() -> Any:
    from agentunit_gym.serve.server import ServeConfig, start_server

    return start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0))


def _remote_env() -> Any:
    with gym.make("AgentUnit/Remote-v0", url="ws://127.0.0.1:9") as env:
        return env.reset()


def _openai_agent() -> Any:
    from agentunit_gym.eval.agents.builtin import resolve_agent

    _, factory = resolve_agent("openai:some-model", base_url="http://127.0.0.1:9/v1", check_endpoint=False)
    return factory()


def _parquet(tmp_path: Path) -> Any:
    from agentunit_gym.eval.record.export import write_rows

    return write_rows([{"a": 1}], tmp_path / "rows.parquet")


def _ray() -> Any:
    from agentunit_gym.eval.run.cluster import connect_cluster

    return connect_cluster("local")


def _token_counter() -> Any:
    from agentunit_gym.wrappers.context import make_token_counter

    return make_token_counter("tiktoken:cl100k_base")


def _kg_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    from agentunit_gym.backends.sparql import container

    # No `oxigraph` wheel in this environment, none on PATH.
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "no-venv"))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "no-base"))
    monkeypatch.setattr(container.importlib.metadata, "distribution",
                        lambda name: (_ for _ in ()).throw(container.importlib.metadata.PackageNotFoundError(name)))
    monkeypatch.setenv("PATH", str(tmp_path))
    return container.oxigraph_binary()


# (what is missing, what the user calls, the extra the message must name)
CASES: list[tuple[str, tuple[str, ...], Callable[..., Any], str]] = [
    ("db-mysql-container-without-docker", ("docker",), _make("AgentUnit/DB-v0", backend="mysql"), "mysql"),
    ("db-mysql-dsn-without-pymysql", ("pymysql",),
     _make("AgentUnit/DB-v0", backend="mysql", dsn="mysql://u:p@127.0.0.1:9/"), "mysql"),
    ("os-docker-without-docker", ("docker",), _make("AgentUnit/OS-v0", backend="docker"), "docker"),
    ("webshop-server-without-docker", ("docker",), _make("AgentUnit/WebShop-v0", backend="server"), "docker"),
    ("kg-sparql-container-without-docker", ("docker",), _make("AgentUnit/KG-v0", backend="sparql"), "docker"),
    ("kg-image-without-oxigraph-server", (), _kg_image, "kg-server"),
    ("export-parquet-without-pyarrow", ("pyarrow",), _parquet, "export"),
    ("openai-agent-without-openai", ("openai",), _openai_agent, "openai"),
    ("mcp-server-without-mcp", ("mcp",), _mcp_server, "mcp"),
    ("env-server-without-openenv", ("openenv",), _env_server, "serve"),
    ("env-server-without-uvicorn", ("uvicorn",), _start_server, "serve"),
    ("remote-env-without-websockets", ("websockets",), _remote_env, "serve"),
    ("ray-without-ray", ("ray",), _ray, "ray"),
    ("tiktoken-counter-without-tiktoken", ("tiktoken",), _token_counter, "tokens"),
]


@pytest.mark.parametrize(("hidden", "call", "extra"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_missing_extra_is_a_config_error_with_the_pip_line(
        hidden: tuple[str, ...], call: Callable[..., Any], extra: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTUNIT_MYSQL_DSN", raising=False)  # the mysql case must want its container
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    hide(monkeypatch, *hidden)
    arguments = {"monkeypatch": monkeypatch, "tmp_path": tmp_path}
    wanted = {name: arguments[name] for name in call.__code__.co_varnames[:call.__code__.co_argcount]}
    with pytest.raises(ConfigError) as info:
        call(**wanted)
    assert isinstance(info.value, MissingDependencyError) and isinstance(info.value, ImportError)
    assert info.value.extra == extra
    assert f'pip install "agentunit-gym[{extra}]"' in str(info.value)


def test_the_cli_exits_2_with_the_pip_line_and_leaves_no_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from agentunit_gym.cli.main import main

    monkeypatch.delenv("AGENTUNIT_MYSQL_DSN", raising=False)
    hide(monkeypatch, "docker")
    out = tmp_path / "run"
    code = main(["eval", "--env", "DB-v0", "--backend", "mysql", "-n", "1", "--quiet", "--output", str(out)])
    assert code == 2
    assert 'pip install "agentunit-gym[mysql]"' in capsys.readouterr().err
    assert not out.exists()


def test_the_docker_sdk_is_imported_in_one_place() -> None:
    """Every use of the Docker SDK goes through ``process.docker_sdk`` (the one seam for daemons),
    so a missing SDK always raises the error with the pip line, wherever it is first needed."""
    found = []
    for path in sorted((ROOT / "agentunit_gym").rglob("*.py")):
        if path == ROOT / "agentunit_gym" / "backends" / "process.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            if any(n == "docker" or n.startswith("docker.") for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"import the Docker SDK through process.docker_sdk(), not directly: {found}"
