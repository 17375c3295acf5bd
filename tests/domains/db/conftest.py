"""Fixtures shared by the DB domain's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentunit_gym.backends.sql.base import SQLBackend


@pytest.fixture(scope="module")
def mysql() -> Iterator[SQLBackend]:
    """Our MariaDB backend (a container), one per test module."""
    from agentunit_gym.backends.sql.factory import open_sql_backend

    backend = open_sql_backend("mysql")
    yield backend
    backend.close()
