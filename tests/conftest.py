"""Shared test setup.

Tests marked ``docker`` need a Docker daemon (and the project's images, which they build on
first use). Locally they are skipped when no daemon answers; with
``AGENTUNIT_REQUIRE_DOCKER=1`` (set by the test script in CI) a missing daemon fails them
instead, so CI cannot go green by skipping the real backend. Tests marked ``ray`` need ray
installed (the ``ray`` extra; the test extra has it) and are required the same way with
``AGENTUNIT_REQUIRE_RAY=1``. Tests marked ``real_model`` need the real small model's venv
(``bash scripts/real-model.sh setup``, built once per machine): skipped without it, failed
with ``AGENTUNIT_REQUIRE_REAL_MODEL=1`` (tests/real_model/conftest.py). Tests of the local
sandbox's limits need a root caller with writable memory, cpu and pids cgroups (v1 or v2): they
skip through :func:`skip_without_cgroup`, which fails instead with ``AGENTUNIT_REQUIRE_CGROUP=1``
(set by the test script where root has them, as on the CI machine).
"""

from __future__ import annotations

import importlib.util
import os
from typing import NoReturn

import pytest

from agentunit_gym.backends.process import docker_available

REQUIRE_DOCKER = os.environ.get("AGENTUNIT_REQUIRE_DOCKER") == "1"
REQUIRE_RAY = os.environ.get("AGENTUNIT_REQUIRE_RAY") == "1"
REQUIRE_REAL_MODEL = os.environ.get("AGENTUNIT_REQUIRE_REAL_MODEL") == "1"
REQUIRE_CGROUP = os.environ.get("AGENTUNIT_REQUIRE_CGROUP") == "1"

# A pytest-xdist worker starts with COLUMNS=80 and LINES=24 in its environment (a single pytest
# process has neither): the CLI's tables honour COLUMNS, so a worker would cut the tables the
# tests read whole. The workers run as one process would.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


def skip_without_cgroup(reason: str) -> NoReturn:
    """Skip a test the host cannot run without the local sandbox's cgroups (``reason`` says
    what is missing); a failure with ``AGENTUNIT_REQUIRE_CGROUP=1``, where they must be there."""
    if REQUIRE_CGROUP:
        pytest.fail(f"AGENTUNIT_REQUIRE_CGROUP=1 but {reason}")
    pytest.skip(f"{reason} (AGENTUNIT_REQUIRE_CGROUP=1 makes this a failure)")

_docker_state: dict[str, bool] = {}


def _have_docker() -> bool:
    if "ok" not in _docker_state:
        _docker_state["ok"] = docker_available(timeout=5.0)
    return _docker_state["ok"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is not None and not _have_docker():
        if REQUIRE_DOCKER:
            pytest.fail("AGENTUNIT_REQUIRE_DOCKER=1 but no Docker daemon answers")
        pytest.skip("no Docker daemon (set AGENTUNIT_REQUIRE_DOCKER=1 to make this a failure)")
    if item.get_closest_marker("ray") is not None and importlib.util.find_spec("ray") is None:
        if REQUIRE_RAY:
            pytest.fail('AGENTUNIT_REQUIRE_RAY=1 but ray is not installed (pip install "agentunit-gym[ray]")')
        pytest.skip('ray is not installed (pip install "agentunit-gym[ray]"; '
                    "AGENTUNIT_REQUIRE_RAY=1 makes this a failure)")
