"""OpenEnv's own validator passes the env server (``openenv validate --url``, its runtime checks).

Run on whichever OpenEnv is installed: openenv-core 0.3.0 (the serve extra's) and openenv 0.10.0
both pass all their criteria (/openapi.json, /health, /metadata, /schema, /mcp, and the
reset/step/state routes of the mode OpenEnv's server runs in).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("openenv.cli")

from agentunit_gym.serve.server import ServeConfig, start_server  # noqa: E402

VALIDATE_DEADLINE_S = 120


def test_openenv_validate_passes_every_criterion_on_a_running_server() -> None:
    with start_server(ServeConfig(env="DB-v0", backend="sqlite", port=0, warm=0)) as running:
        done = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "validate", "--url", running.url, "--json", "--timeout", "30"],
            capture_output=True, text=True, timeout=VALIDATE_DEADLINE_S, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"] is True and failed == [], failed
    assert report["summary"]["required_passed_count"] == report["summary"]["required_total_count"] >= 5
    ids = {c["id"] for c in report["criteria"]}
    assert {"health_endpoint", "metadata_endpoint", "schema_endpoint"} <= ids
