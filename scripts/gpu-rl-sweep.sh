#!/usr/bin/env bash
# Several RL runs side by side on one GPU (a `--features cuda` build), their adapters
# and metrics packed into one file to carry back; evaluate them here afterwards
# (`rmsweb eval --checkpoint RUN/checkpoints/step-N`: a checkpoint without its merged
# model loads through its adapter).
#
#   INIT=.gpu/ck DATASET=.gpu/pool bash scripts/gpu-rl-sweep.sh [BIN]
#
# BIN: the carried binary, as for scripts/gpu-check.sh (default .gpu/rmsweb.gz). INIT:
# the SFT checkpoint folder; DATASET: the mining pool (mined/pairs.jsonl, sft/, the
# trajectories; screenshots are not needed by a text policy). Both must travel: copy
# them under .gpu/ and carry [".gpu"].
#
# RUNS lists name:mode:seed[:prompts] (prompts: mined or full-corpus); every run has
# the tiny preset, grounded rollouts, STEPS steps and a checkpoint every EVERY steps,
# and is stopped after LIMIT seconds (the trainer checkpoints on SIGTERM). Extra
# `--set` arguments go in SET ("lr=5e-4 kl_coef=0.01").
#
# Writes $OUT/rl.tgz (each run's metrics.jsonl, run.toml, logs and checkpoints
# without the merged model, optimizer state or tokenizer: about 0.25 MB per
# checkpoint; copy the SFT checkpoint's tokenizer.json into each one here),
# $OUT/timeline.txt and $OUT/smi.txt (nvidia-smi a minute in).
#
# Measured (issue #15 note, one H200, 16 cores): five runs side by side took 4.0 to
# 4.8 s per step each on average (one alone: 1.8 to 2.9 s), three 2.9 to 3.4 s; every
# process held about 2 GB of GPU memory.
set -u
SRC=${1:-.gpu/rmsweb.gz}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
T0=$SECONDS
stamp() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$OUT/timeline.txt"; }
W=$(mktemp -d)
BIN=$SRC
if [[ $SRC == *.gz ]]; then
  BIN=$W/rmsweb
  gzip -dc "$SRC" >"$BIN" && chmod +x "$BIN" || exit 1
fi
libdirs=()
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu \
  /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && libdirs+=("$d")
done
LD_LIBRARY_PATH=$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
INIT=${INIT:?INIT: the SFT checkpoint folder}
DATASET=${DATASET:?DATASET: the mining pool}
DEV=${DEV:-cuda:0}
STEPS=${STEPS:-100}
LIMIT=${LIMIT:-420}
EVERY=${EVERY:-20}
# A few CPU threads per run (see scripts/gpu-check.sh on the thread stall).
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-3}
extra=()
for s in ${SET:-}; do extra+=(--set "$s"); done
mkdir -p "$W/runs"
pids=()
stamp start
run() {
  local name=$1
  shift
  timeout -k 10 "$LIMIT" "$BIN" train rl --preset tiny --init "$INIT" --dataset "$DATASET" \
    --device "$DEV" --run-dir "$W/runs/$name" --steps "$STEPS" --set grounded=true \
    --set checkpoint_every="$EVERY" "${extra[@]}" "$@" >"$W/runs/$name.log" 2>&1
  stamp "$name rc=$?"
}
for spec in ${RUNS:-sd1:salvage-ds:1 dapo1:dapo:1 af1:anchor-free:1 fc1:salvage-ds:1:full-corpus}; do
  IFS=: read -r name mode seed prompts <<<"$spec"
  run "$name" --mode "$mode" --prompts "${prompts:-mined}" --set seed="$seed" &
  pids+=($!)
done
(sleep 60 && nvidia-smi >"$OUT/smi.txt" 2>&1) &
smi=$!
wait "${pids[@]}"
kill "$smi" 2>/dev/null
tar czf "$OUT/rl.tgz" -C "$W/runs" --exclude=model.safetensors --exclude=optimizer.safetensors \
  --exclude=trainable.safetensors --exclude=rollouts.jsonl --exclude=tokenizer.json .
stamp "done: $(du -h "$OUT/rl.tgz" | cut -f1)"
