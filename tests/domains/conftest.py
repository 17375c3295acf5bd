"""Fixtures of the registry-driven domain tests: the example domain installed once per session,
and every registered domain as a case (see :mod:`tests.domains.conformkit`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentunit_gym.core import registry
from tests.domains.conformkit import EXAMPLE_DOMAIN, DomainCase, case_names, example_domain_installed, install_example


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example domain, ``pip install``-ed into a folder of its own (once per session)."""
    return install_example(tmp_path_factory.mktemp("example_domain"))


@pytest.fixture(scope="module")
def domain_case(request: pytest.FixtureRequest) -> Iterator[DomainCase]:
    """The domain named by the test's ``domain_name`` parameter; the example domain is
    registered in this process while its tests run (and unregistered after)."""
    name = request.param
    if name == EXAMPLE_DOMAIN and name not in registry.domain_names():
        with example_domain_installed(request.getfixturevalue("example_site")) as domain:
            yield DomainCase(domain)
        return
    yield DomainCase(registry.get_domain(name))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that takes ``domain_case`` runs once per registered domain (module-scoped:
    a domain's tests share its envs)."""
    if "domain_case" in metafunc.fixturenames:
        metafunc.parametrize("domain_case", case_names(), indirect=True, scope="module")
