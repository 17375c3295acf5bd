"""The seam to OpenEnv's server API: either distribution, and errors that name the way out.

Fake module layouts and fake distribution metadata stand in for OpenEnv here (no install, no
network); tests/serve/test_remote_env.py and test_server_hostile.py run the real server on
whichever OpenEnv is installed (openenv-core 0.3.0 and openenv 0.10.0 both pass them).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
from collections.abc import Callable
from types import ModuleType

import pytest

from agentunit_gym.errors import ConfigError, DependencyVersionError, MissingDependencyError
from agentunit_gym.serve.mcp_server import _require_mcp
from agentunit_gym.serve.openenv_api import OpenEnvServerAPI, installed_distributions, load_server_api


class FakeAction:
    pass


class FakeConcurrencyConfig:
    pass


def create_app_fake() -> None:
    return None


def layout(*, without: str | None = None) -> dict[str, ModuleType]:
    """OpenEnv's server modules as both openenv-core 0.3 and openenv 0.10 lay them out, less ``without``."""
    server = ModuleType("openenv.core.env_server")
    interfaces = ModuleType("openenv.core.env_server.interfaces")
    types = ModuleType("openenv.core.env_server.types")
    server.create_app = create_app_fake  # type: ignore[attr-defined]
    interfaces.Environment = type("Environment", (), {})  # type: ignore[attr-defined]
    types.Action = FakeAction  # type: ignore[attr-defined]
    types.ConcurrencyConfig = FakeConcurrencyConfig  # type: ignore[attr-defined]
    for name in ("Observation", "State", "EnvironmentMetadata"):
        setattr(types, name, type(name, (), {}))
    modules = {m.__name__: m for m in (server, interfaces, types)}
    if without is not None:
        delattr(modules[without.rsplit(":", 1)[0]], without.rsplit(":", 1)[1])
    return modules


def importer(modules: dict[str, ModuleType]) -> Callable[[str], ModuleType]:
    def import_module(name: str) -> ModuleType:
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return modules[name]
    return import_module


def versions(**installed: str) -> Callable[[str], str]:
    """A ``version_of`` for distributions given as keyword arguments (``openenv_core`` for openenv-core)."""
    by_name = {name.replace("_", "-"): version for name, version in installed.items()}

    def version_of(name: str) -> str:
        if name not in by_name:
            raise importlib.metadata.PackageNotFoundError(name)
        return by_name[name]
    return version_of


@pytest.mark.parametrize("installed", [{"openenv_core": "0.3.0"}, {"openenv": "0.10.0"}],
                         ids=["openenv-core-0.3", "openenv-0.10"])
def test_either_distribution_gives_the_same_api(installed: dict[str, str]) -> None:
    api = load_server_api(import_module=importer(layout()), version_of=versions(**installed))
    assert api.create_app is create_app_fake
    assert api.Action is FakeAction and api.ConcurrencyConfig is FakeConcurrencyConfig
    assert [c.__name__ for c in (api.Environment, api.Observation, api.State, api.EnvironmentMetadata)] == [
        "Environment", "Observation", "State", "EnvironmentMetadata"]
    name, version = next(iter(installed.items()))
    assert api.description == f"{name.replace('_', '-')} {version}"
    assert api.clash is None


def test_both_distributions_are_named_as_a_clash_with_the_fix() -> None:
    api = load_server_api(import_module=importer(layout()), version_of=versions(openenv_core="0.3.0", openenv="0.10.0"))
    assert api.description == "openenv-core 0.3.0 and openenv 0.10.0"
    assert api.clash is not None
    assert "share the openenv import package" in api.clash
    assert 'pip uninstall -y openenv openenv-core && pip install "agentunit-gym[serve]"' in api.clash


def test_no_openenv_is_a_missing_dependency_with_the_pip_line() -> None:
    with pytest.raises(MissingDependencyError) as info:
        load_server_api(import_module=importer({}), version_of=versions())
    assert type(info.value) is MissingDependencyError and isinstance(info.value, ImportError)
    assert (info.value.package, info.value.extra) == ("openenv-core", "serve")
    assert 'pip install "agentunit-gym[serve]"' in str(info.value)


@pytest.mark.parametrize("without", ["openenv.core.env_server:create_app",
                                     "openenv.core.env_server.types:ConcurrencyConfig"])
def test_an_openenv_whose_api_moved_names_what_runs_and_the_way_out(without: str) -> None:
    with pytest.raises(DependencyVersionError) as info:
        load_server_api(import_module=importer(layout(without=without)), version_of=versions(openenv="0.11.0"))
    message = str(info.value)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ImportError)
    assert info.value.extra == "serve" and info.value.found.startswith("openenv 0.11.0")
    assert without.rsplit(":", 1)[1] in message  # the import that failed
    assert "openenv-core 0.3.x" in message and "openenv 0.10.x" in message
    assert 'pip install "agentunit-gym[serve]"' in message
    assert 'pip install "openenv>=0.10,<0.11" and skip the mcp and integrations extras' in message
    assert "pip uninstall -y openenv openenv-core" in message


def test_a_missing_server_module_with_openenv_installed_is_a_version_error() -> None:
    modules = layout()
    del modules["openenv.core.env_server.interfaces"]
    with pytest.raises(DependencyVersionError, match="openenv-core 0.3.0 .*openenv.core.env_server.interfaces"):
        load_server_api(import_module=importer(modules), version_of=versions(openenv_core="0.3.0"))


def test_installed_distributions_lists_the_serve_extras_first() -> None:
    assert installed_distributions(versions(openenv="0.10.0", openenv_core="0.3.0")) == {
        "openenv-core": "0.3.0", "openenv": "0.10.0"}
    assert installed_distributions(versions()) == {}


def test_the_real_api_says_which_distribution_runs() -> None:
    pytest.importorskip("openenv")
    api = load_server_api()
    assert isinstance(api, OpenEnvServerAPI)
    assert set(api.installed) <= {"openenv-core", "openenv"} and api.installed
    assert api.create_app.__module__.startswith("openenv.core.env_server")


def test_the_server_warns_when_both_distributions_are_installed(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("openenv")
    from agentunit_gym.serve import server as server_module

    both = dataclasses.replace(load_server_api(), installed={"openenv-core": "0.3.0", "openenv": "0.10.0"})
    monkeypatch.setattr(server_module, "load_server_api", lambda: both)
    with caplog.at_level(logging.WARNING, logger="agentunit_gym"):
        server = server_module.EnvServer(server_module.ServeConfig(env="DB-v0", backend="sqlite", warm=0))
    try:
        assert server.metadata()["openenv"] == "openenv-core 0.3.0 and openenv 0.10.0"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("share the openenv import package" in w and "pip uninstall -y openenv openenv-core" in w
                   for w in warnings), warnings
    finally:
        server.close()


@pytest.mark.parametrize("version", ["1.30.0", "1.24.0"])
def test_the_mcp_server_refuses_mcp_1_naming_openenv_as_the_cause(version: str) -> None:
    pytest.importorskip("mcp")
    with pytest.raises(DependencyVersionError) as info:
        _require_mcp(versions(mcp=version))
    message = str(info.value)
    assert info.value.found == f"mcp {version}" and info.value.extra == "mcp"
    assert "needs mcp 2.0.x" in message and "the openenv package (0.4.2 or later)" in message
    assert 'pip uninstall -y openenv openenv-core && pip install "agentunit-gym[serve,mcp]"' in message


def test_the_mcp_server_takes_mcp_2() -> None:
    pytest.importorskip("mcp")
    _require_mcp(versions(mcp="2.0.0"))
