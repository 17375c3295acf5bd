#!/usr/bin/env bash
# Refresh requirements/test.lock.txt: the `test` extra and its whole tree, exact versions,
# resolved for Python 3.11+ on every platform (uv's universal resolution). Needs uv
# (`pip install uv`). Run it after changing a dependency in pyproject.toml, or to move the
# tested versions forward; then run `bash scripts/test.sh` and commit both files.
#
# Usage: bash scripts/lock.sh [--upgrade | --upgrade-package NAME ...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec uv pip compile pyproject.toml --extra test --universal --python-version 3.11 \
  --custom-compile-command "bash scripts/lock.sh" --output-file requirements/test.lock.txt "$@"
