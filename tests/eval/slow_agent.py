"""Slow and stuck doubles for the evaluator tests.

``SlowOracle`` is importable as ``tests.eval.slow_agent:SlowOracle`` (the kill-and-resume test
passes it to the CLI); ``StuckToy`` is a backend whose step hangs (the deadline tests).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from agentunit_gym.core.env import Execution
from agentunit_gym.eval.agents.builtin import OracleAgent
from tests.core.toy import ToyEnv


class SlowOracle(OracleAgent):
    def act(self, observation: str, info: dict[str, Any]) -> str:
        time.sleep(0.15)
        return super().act(observation, info)


class StuckToy(ToyEnv):
    """A backend whose command hangs until the test releases it (at most 60 s).

    A test sets fresh ``release``/``returned`` events first; a call reads them once, so a
    step released by an earlier test's cleanup cannot mark a later test's event.
    """

    release = threading.Event()
    returned = threading.Event()

    def _execute(self, action: Any) -> Execution:
        release, returned = StuckToy.release, StuckToy.returned
        release.wait(60)
        returned.set()
        return super()._execute(action)
