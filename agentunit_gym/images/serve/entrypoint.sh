#!/bin/sh
# The serve image's command: `agentunit-gym serve` on 0.0.0.0:8000 (the port OpenEnv's Docker
# provider maps). What it serves comes from the environment, which is all OpenEnv's provider
# can pass (`docker run -e`):
#   AGENTUNIT_GYM_TOKEN    the bearer token (required: the server refuses to listen beyond
#                          loopback without one, and exits 2 saying so)
#   AGENTUNIT_GYM_ENV      the env id (default DB-v0)
#   AGENTUNIT_GYM_BACKEND  its backend (default: the env's own default)
# Arguments given to the container are added to the command (`--max-sessions 4` ...).
# --check-reset: a backend that cannot run in the container (the OS env's local sandbox where
# the container may not make namespaces) stops the server at start, with the reason, rather
# than failing each session.
set -eu
if [ -n "${AGENTUNIT_GYM_BACKEND:-}" ]; then
    set -- --backend "$AGENTUNIT_GYM_BACKEND" "$@"
fi
exec agentunit-gym serve --env "${AGENTUNIT_GYM_ENV:-DB-v0}" --host 0.0.0.0 --port 8000 --check-reset "$@"
