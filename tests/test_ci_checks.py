"""The README's test command (scripts/test.sh, which .ci/run calls) runs ruff and strict mypy before
pytest, at the lock's versions, and stops on either.

The static-check block of the script (between its ``# ---- static checks`` and ``# ---- end of
static checks`` lines) runs here with a stand-in interpreter that records each command and fails
the ones it is told to, so the test sees what the script runs and what it does on a failure
without running the real tools (CI runs those for real, in the script)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test.sh"
LOCK = ROOT / "requirements" / "test.lock.txt"


def _static_block() -> str:
    text = SCRIPT.read_text(encoding="utf-8")
    start = text.index("# ---- static checks")
    end = text.index("# ---- end of static checks")
    assert start < end < text.index('-m pytest '), "the static checks must come before pytest"
    return text[start:end]


def _run_block(tmp_path: Path, failing: str) -> subprocess.CompletedProcess[str]:
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n'
                    f'case "$2" in {failing or "none-fails"}) echo "$2 found problems"; exit 1;; esac\n',
                    encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = tmp_path / "block.sh"
    script.write_text("set -euo pipefail\nphase() { :; }\nlog() { :; }\n" f'PY="{fake}"\n' + _static_block()
                      + 'echo "static checks passed"\n', encoding="utf-8")
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False,
                          cwd=tmp_path, env={**os.environ})


def test_both_checks_run_with_the_contributors_commands(tmp_path: Path) -> None:
    done = _run_block(tmp_path, "")
    assert done.returncode == 0 and done.stdout.strip() == "static checks passed"
    assert (tmp_path / "calls.txt").read_text(encoding="utf-8").splitlines() == [
        "-m ruff check agentunit_gym tests benchmarks examples tools", "-m mypy"]
    assert "ruff check agentunit_gym tests benchmarks examples tools" in (
        ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("failing", "named"), [("ruff", "ruff"), ("mypy", "mypy"), ("ruff|mypy", "ruff mypy")])
def test_a_failing_check_stops_the_script_and_is_named(tmp_path: Path, failing: str, named: str) -> None:
    done = _run_block(tmp_path, failing)
    assert done.returncode == 1
    assert "static checks passed" not in done.stdout
    assert done.stderr.strip() == f"static checks failed: {named} (output above); the tests did not run"
    # mypy runs even when ruff failed, so one run shows both.
    assert len((tmp_path / "calls.txt").read_text(encoding="utf-8").splitlines()) == 2


def test_ruff_and_mypy_come_from_the_lock() -> None:
    pins = {line.split("==")[0]: line.split("==")[1].split()[0] for line in LOCK.read_text().splitlines()
            if "==" in line and not line.startswith(("#", " "))}
    assert {"ruff", "mypy", "types-pyyaml"} <= set(pins), "run bash scripts/lock.sh"
    assert "-r \"$LOCK\" -e \".[test]\"" in SCRIPT.read_text(encoding="utf-8")
