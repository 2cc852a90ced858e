#!/usr/bin/env bash
# One short check of a `--features cuda` build on a GPU machine (CUDA 13 driver).
#
#   bash scripts/gpu-check.sh [BIN]     # BIN: the carried binary (default .gpu/rmsweb.gz)
#
# BIN may be gzip-compressed (NAME.gz): the stripped release binary is about 70 MB, over
# the device tool's 64 MiB carry limit, and about 20 MB gzipped. Prepare it here with
#   mkdir -p .gpu && strip -o .gpu/rmsweb "$CARGO_TARGET_DIR/release/rmsweb" && gzip -9f .gpu/rmsweb
# (and `echo /.gpu/ >> .git/info/exclude`), then run this script with carry [".gpu"].
#
# Run from the repository root (it trains on the bundled fixtures/). Needs the driver
# and the CUDA 13 libraries; it looks for them in the usual places (the driver mount,
# /usr/local/cuda, Python's nvidia/cu13 wheels) and puts them on LD_LIBRARY_PATH.
# Writes to $OUT (or a temporary folder): summary.txt (the verdict, first losses and
# throughput of each run), nvidia-smi.txt, ldd.txt, runs.log (every run's stdout.log and
# metrics.jsonl). Exits non-zero if anything failed.
#
# The runs, 4 optimizer steps of 8 samples (512-token context) each, all with the same
# tokenizer and data order:
#   tiny/cpu, tiny/cuda:0 (auto dtype = f32), tiny/cuda:0 with dtype=bf16, then
#   qwen3-lora on the tiny checkpoint: cpu (f32) and cuda:0 (auto dtype = bf16).
# Step 1's loss is computed before any update, so each GPU run's first loss must match
# the CPU's: within 1e-3 (relative) in f32 and 3e-2 in bf16.
set -uo pipefail

SRC=${1:-.gpu/rmsweb.gz}
OUT=${OUT:-$(mktemp -d)}
STEPS=${STEPS:-4}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
mkdir -p "$OUT"
W=$(mktemp -d)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
fail=0

if [[ "$SRC" == *.gz && -f "$SRC" ]]; then
  BIN="$W/rmsweb"
  gzip -dc "$SRC" >"$BIN" && chmod +x "$BIN"
else
  BIN=$(realpath "$SRC")
fi
[[ -x "$BIN" ]] || { say "FAIL: no executable at $SRC"; exit 2; }
[[ -f fixtures/dataset.toml ]] || { say "FAIL: run from the repository root"; exit 2; }

# Libraries: driver first, then a CUDA 13 toolkit, then the pip wheels.
libdirs=()
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && libdirs+=("$d")
done
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$("$py" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null) \
    && [[ -d "$d" ]] && libdirs+=("$d") && break
done
LD_LIBRARY_PATH=$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
say "binary: $BIN"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

ldd "$BIN" >"$OUT/ldd.txt" 2>&1
if grep -q 'not found' "$OUT/ldd.txt"; then
  say "FAIL: libraries not found: $(grep 'not found' "$OUT/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
  exit 3
fi
for lib in libcuda.so.1 libcublas.so libcudart.so; do
  say "  $(grep -m1 "$lib" "$OUT/ldd.txt" | sed 's/^[[:space:]]*//')"
done

if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  say "gpu: $(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>&1)"
else
  say "gpu: nvidia-smi not found" | tee "$OUT/nvidia-smi.txt"
fi

# run NAME DEVICE [extra args...]: one SFT run in $W/NAME, reusing tiny/cpu's tokenizer.
run() {
  local name=$1 device=$2
  shift 2
  local dir="$W/$name"
  mkdir -p "$dir"
  [[ -f "$W/tiny-cpu/tokenizer.json" && "$name" == tiny-* ]] && cp "$W/tiny-cpu/tokenizer.json" "$dir/"
  local t0=$SECONDS
  timeout "$RUN_TIMEOUT" "$BIN" train sft --dataset fixtures --device "$device" --run-dir "$dir" \
    --steps "$STEPS" "$@" >"$dir/cli.out" 2>&1
  local rc=$?
  {
    echo "===== $name ($device $*): exit $rc in $((SECONDS - t0)) s"
    tail -n 5 "$dir/cli.out"
    cat "$dir/stdout.log" "$dir/metrics.jsonl" 2>/dev/null
  } >>"$OUT/runs.log"
  if [[ $rc -ne 0 ]]; then
    say "FAIL: $name exited $rc: $(grep -m1 -i 'error\|panicked' "$dir/cli.out")"
    fail=1
  fi
  return 0
}

tiny=(--preset tiny --set context=512)
run tiny-cpu cpu "${tiny[@]}"
run tiny-cuda cuda:0 "${tiny[@]}"
run tiny-cuda-bf16 cuda:0 "${tiny[@]}" --set dtype=bf16
base="$W/tiny-cpu/checkpoints/step-$STEPS"
lora=(--preset qwen3-lora --model "$base" --set micro_batch=4 --set grad_accum=2 --set context=512)
run lora-cpu cpu "${lora[@]}"
run lora-cuda cuda:0 "${lora[@]}"

# Compare first losses and report throughput (python3 is there on the GPU image).
python3 - "$W" <<'PY' | tee -a "$SUMMARY"

import json, pathlib, re, sys
w = pathlib.Path(sys.argv[1])
def load(name):
    p = w / name / "metrics.jsonl"
    rows = [json.loads(l)["data"] for l in p.read_text().splitlines()] if p.exists() else []
    log = (w / name / "stdout.log").read_text() if (w / name / "stdout.log").exists() else ""
    m = re.search(r" in (\w+)$", next((l for l in log.splitlines() if "training " in l), ""))
    return rows, m.group(1) if m else "?"
ok = True
for cpu, gpu, tol, want in [("tiny-cpu", "tiny-cuda", 1e-3, "F32"),
                            ("tiny-cpu", "tiny-cuda-bf16", 3e-2, "BF16"),
                            ("lora-cpu", "lora-cuda", 3e-2, "BF16")]:
    (a, _), (b, dt) = load(cpu), load(gpu)
    if not a or not b:
        print(f"FAIL: {gpu} vs {cpu}: missing metrics"); ok = False; continue
    la, lb = a[0]["sft/loss"], b[0]["sft/loss"]
    rel = abs(la - lb) / max(abs(la), 1e-12)
    good = rel <= tol and dt == want
    ok &= good
    tps = lambda r: sum(x["perf/tokens_per_s"] for x in r[1:] or r) / len(r[1:] or r)
    print(f"{'ok  ' if good else 'FAIL'}: {gpu} ({dt}, want {want}) first loss {lb:.6f} vs "
          f"{cpu} {la:.6f}: rel diff {rel:.2e} (tol {tol:g}); last {b[-1]['sft/loss']:.4f}; "
          f"tokens/s {tps(b):.0f} vs cpu {tps(a):.0f}")
sys.exit(0 if ok else 1)
PY
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1

if [[ $fail -eq 0 ]]; then say "gpu-check: PASS"; else say "gpu-check: FAIL"; fi
exit $fail
