"""Run ``agentunit-gym`` as a user would: a subprocess in a folder of the test's own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path, timeout: float = 180.0, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    """``python -m agentunit_gym ARGS`` in ``cwd``, its output captured as text."""
    environment = {**os.environ, "COLUMNS": "200", **(env or {})}
    environment.pop("PYTHONPATH", None)  # the user's shell has none: imports from cwd must work without it
    return subprocess.run([sys.executable, "-m", "agentunit_gym", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout, check=False)


def default_sigint() -> None:
    """``preexec_fn`` for a child the test will send Ctrl-C: SIGINT at its default, however this
    test process was started (a background job of a script inherits it ignored, and so would
    the child, which then ignores the Ctrl-C as a ``nohup``'d program rightly does)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
