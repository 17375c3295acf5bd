#!/usr/bin/env bash
# Run the whole test suite, real backends included.
#
# On a fresh machine (as root) this installs what the real backends need from Debian's
# packages (Docker engine, debootstrap, bubblewrap, Chromium), starts dockerd when none
# answers (and leaves it running afterwards, saying so), builds the project's images
# (bootstrapping the base image from Debian packages when nothing can be pulled), then runs
# pytest with the Docker-backed tests required, not skipped. As a non-root user without
# Docker it runs everything that needs no daemon. It builds the real small model's venv
# (scripts/real-model.sh, cached under ~/.cache/agentunit-gym) and requires its tests too.
#
# It installs the package and the `test` extra at the exact versions of
# requirements/test.lock.txt (scripts/lock.sh refreshes it), into a virtualenv of its own
# (.venv) unless one is active or $PYTHON names an interpreter. scripts/test-latest.sh runs the
# same suite on the newest versions the ranges in pyproject.toml allow.
#
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> [%s, %ss in] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*"; }

# Phase times: `phase NAME` closes the running phase and opens NAME; the table is printed when
# the script ends (also on a failure), so a slow day shows where its minutes went.
PHASE_NAMES=()
PHASE_SECONDS=()
PHASE_NAME=""
PHASE_START=$SECONDS
phase() {
  if [ -n "$PHASE_NAME" ]; then
    PHASE_NAMES+=("$PHASE_NAME")
    PHASE_SECONDS+=($((SECONDS - PHASE_START)))
  fi
  PHASE_NAME=$1
  PHASE_START=$SECONDS
}
phase_table() {
  phase ""
  printf '\n==> phase times (s)\n'
  local i
  for i in "${!PHASE_NAMES[@]}"; do
    printf '    %-28s %6s\n' "${PHASE_NAMES[$i]}" "${PHASE_SECONDS[$i]}"
  done
  printf '    %-28s %6s\n' "total" "$SECONDS"
}
trap phase_table EXIT
have() { command -v "$1" >/dev/null 2>&1; }
is_root() { [ "$(id -u)" = 0 ]; }
# Whether root can give a box memory, cpu and pids cgroups: each controller on a writable
# cgroup2 mount that offers it, or on a writable v1 mount of its own (the CI machine: v1, with an
# empty v2 "unified" beside). Read from the mounts, not from the package, so a regression in the
# package's own detection fails the limit tests instead of skipping them.
cgroups_writable() {
  is_root || return 1
  local c
  for c in memory cpu pids; do
    if grep -qw "$c" /sys/fs/cgroup/cgroup.controllers 2>/dev/null && [ -w /sys/fs/cgroup ]; then
      continue
    fi
    awk -v c="$c" '$3 == "cgroup" && ("," $4 ",") ~ ("," c ",") && ("," $4 ",") ~ /,rw,/ { found = 1 }
                   END { exit !found }' /proc/mounts || return 1
  done
}

# The interpreter: $PYTHON when set; else the active virtualenv's; else a venv of the
# checkout's own (AGENTUNIT_VENV, .venv by default), made here when missing, so the suite
# runs on exactly the locked versions and never on whatever a warm machine has installed.
phase "venv"
LOCK=${AGENTUNIT_LOCK-requirements/test.lock.txt}
if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
elif [ -n "${VIRTUAL_ENV:-}" ]; then
  PY=$VIRTUAL_ENV/bin/python
else
  venv=${AGENTUNIT_VENV:-.venv}
  if [ ! -x "$venv/bin/python" ]; then
    log "making a virtual environment in $venv"
    python3 -m venv "$venv"
  fi
  PY=$venv/bin/python
fi

phase "pip install (lock)"
if [ -n "$LOCK" ]; then
  log "installing agentunit-gym with its test extras, at the versions in $LOCK"
  "$PY" -m pip install --quiet --disable-pip-version-check -r "$LOCK" -e ".[test]"
else
  log "installing agentunit-gym with its test extras, newest versions its ranges allow (no lock)"
  "$PY" -m pip install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager -e ".[test]"
fi
"$PY" -m pip check || { echo "the installed packages conflict (pip check above)" >&2; exit 1; }

# ---- static checks (issue 35): ruff, then strict mypy, before any test -------------------------
# At the lock's versions (the `test` extra has both), right after installing, so a lint or type
# error ends the run before the slow steps. Both run; either failing ends the script here,
# naming which. The same commands as docs/contributing.md's.
phase "ruff + mypy"
log "static checks: ruff check, then mypy (strict, pyproject.toml's [tool.mypy])"
static_failed=()
"$PY" -m ruff check agentunit_gym tests benchmarks examples tools || static_failed+=("ruff")
"$PY" -m mypy || static_failed+=("mypy")
if [ ${#static_failed[@]} -gt 0 ]; then
  echo "static checks failed: ${static_failed[*]} (output above); the tests did not run" >&2
  exit 1
fi
# ---- end of static checks ---------------------------------------------------------------------

phase "Debian packages"
if is_root && have apt-get; then
  missing=()
  have dockerd || missing+=(docker.io)
  have debootstrap || missing+=(debootstrap)
  have bwrap || missing+=(bubblewrap)
  have chromium || missing+=(chromium)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

docker_up() { timeout 10 docker info >/dev/null 2>&1; }

# A daemon started here is left running when the script ends, so that what runs next (the
# README's `agentunit-gym eval`) sees the same backends the tests used; it is said twice.
phase "dockerd"
started_dockerd=""
if have dockerd && ! docker_up && is_root; then
  log "starting dockerd (it keeps running after the tests; log: /tmp/agentunit-dockerd.log)"
  nohup dockerd >/tmp/agentunit-dockerd.log 2>&1 &
  started_dockerd=$!
  for _ in $(seq 1 60); do docker_up && break; sleep 1; done
  docker_up || { echo "dockerd did not come up within 60 s; see /tmp/agentunit-dockerd.log" >&2; exit 1; }
fi
say_dockerd() {
  [ -n "$started_dockerd" ] || return 0
  log "the Docker daemon this script started is still running (pid $started_dockerd), so" \
      "agentunit-gym eval uses the docker backend; stop it with: kill $started_dockerd"
}
trap 'phase_table; say_dockerd' EXIT

phase "images"
if docker_up; then
  log "building the project's images (bootstraps the base image if nothing can be pulled)"
  "$PY" -m agentunit_gym images build
  export AGENTUNIT_REQUIRE_DOCKER=1
else
  log "no Docker daemon: Docker-backed tests will be skipped"
fi
# The test extra installs ray: its tests (a two-node cluster on this machine) must run, not skip.
export AGENTUNIT_REQUIRE_RAY=1

# The real small model (tests/real_model, docs/baselines.md): its venv is built once per machine
# under ~/.cache/agentunit-gym (the first time llama.cpp's libraries compile; docs/baselines.md
# has the minutes), then reused; its tests are then required. AGENTUNIT_SKIP_REAL_MODEL=1
# leaves the build out, and the tests skip.
phase "real-model venv"
if [ "${AGENTUNIT_SKIP_REAL_MODEL:-}" != 1 ]; then
  log "the real-model venv (scripts/real-model.sh setup; built once per machine, then cached)"
  REAL_MODEL_BASE_PYTHON=${REAL_MODEL_BASE_PYTHON:-python3} bash scripts/real-model.sh setup >/dev/null
  export AGENTUNIT_REQUIRE_REAL_MODEL=1
fi
if have chromium; then
  export AGENTUNIT_REQUIRE_CHROMIUM=1
fi
# The local sandbox's limit tests (tests/conftest.py's skip_without_cgroup) must run, not skip.
if cgroups_writable; then
  export AGENTUNIT_REQUIRE_CGROUP=1
fi

# The suite over every core (pytest-xdist, in the test extra): a test file runs whole on one
# worker (--dist loadfile), so its module and session fixtures (a MySQL server, the Ray cluster,
# the real model's server) start once. AGENTUNIT_TEST_WORKERS sets the count (0: one process,
# as for --pdb).
phase "tests"
WORKERS=${AGENTUNIT_TEST_WORKERS:-auto}
log "running the test suite ($WORKERS workers)"
"$PY" -m pytest -n "$WORKERS" --dist loadfile "$@"
