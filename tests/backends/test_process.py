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
