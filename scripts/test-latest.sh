#!/usr/bin/env bash
# The whole test suite on the newest releases that pyproject.toml's ranges allow, not the
# lock: run it on purpose (before refreshing the lock, or on a schedule) to meet the next
# upstream break before a fresh machine does. A venv of its own (.venv-latest), made anew.
#
# Usage: bash scripts/test-latest.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .venv-latest
python3 -m venv .venv-latest
AGENTUNIT_LOCK="" AGENTUNIT_VENV=.venv-latest exec bash scripts/test.sh "$@"
