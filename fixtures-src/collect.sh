#!/usr/bin/env bash
# Rebuilds fixtures/ (the bundled dataset the workbench opens by default) from real
# MiniWoB++ collection runs:
#   1. `rmsweb collect` with the scripted teacher (mistake rate 0.25, seeded by the
#      episode seed, so every run makes the same mistakes), three reflection-conditioned
#      rounds, screenshots on, over the (task, seeds) list below;
#   2. normalize.py makes ids, URLs and timing stable (see its docstring);
#   3. `rmsweb mine` with mine.toml writes the mined pairs (must not be empty);
#   4. `rmsweb validate` must report no problem, and the folder must stay under 5 MB.
# Needs python3, chromium and the MiniWoB++ pages (`bash .ci/install-env.sh`, which
# this script runs; it is idempotent).
# Usage: fixtures-src/collect.sh [OUT_DATASET]   (default: fixtures/)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
out="${1:-$repo/fixtures}"
rate=0.25
# task, first seed, number of seeds (one collect run per line; the detour check
# compares a success only with earlier successes of the same instance, task + seed).
specs=(
  "login-user 0 1"
  "login-user 5 3"
  "enter-password 2 4"
  "enter-text 1 2"
  "click-checkboxes 0 1"
  "click-checkboxes 3 1"
  "choose-list 2 2"
  "click-option 0 2"
  "click-button-sequence 1 2"
  "click-test-2 2 2"
  "click-dialog-2 5 3"
)

bash "$repo/.ci/install-env.sh"
cargo build --quiet --manifest-path "$repo/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$repo/target}/debug/rmsweb"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for spec in "${specs[@]}"; do
  read -r task start n <<<"$spec"
  "$bin" collect --tasks "miniwob:$task" --seed-start "$start" --seeds "$n" --rounds 3 \
    --mistake-rate "$rate" --dataset "$work/raw" --report "$work/report-$task-$start.json" \
    | sed -n '/^round/,/^all/p'
done
# Keep existing runs/ (training runs shown by the Runs tab) and evals/ (evaluation
# files for `eval compare`) folders across rebuilds.
for keep in runs evals; do
  if [ -d "$out/$keep" ]; then mv "$out/$keep" "$work/$keep"; fi
done
rm -rf "$out"
python3 "$here/normalize.py" "$work/raw" "$out"
for keep in runs evals; do
  if [ -d "$work/$keep" ]; then mv "$work/$keep" "$out/$keep"; fi
done
# dataset.toml: fixed name and date so rebuilds only differ where content does.
cat > "$out/dataset.toml" <<TOML
name = "fixtures"
schema = 1
created_at = "2026-01-01T00:00:00Z"
notes = "Built by fixtures-src/collect.sh: live MiniWoB++ runs of the scripted teacher (mistake rate $rate), three reflection-conditioned rounds per seed, screenshots of the task area."
TOML
"$bin" mine --dataset "$out" --config "$here/mine.toml"
pairs="$(wc -l <"$out/mined/pairs.jsonl")"
[ "$pairs" -gt 0 ] || { echo "collect.sh: no mined pairs" >&2; exit 1; }
"$bin" validate "$out"
bytes="$(du -sb "$out" | cut -f1)"
[ "$bytes" -lt $((5 << 20)) ] || { echo "collect.sh: $out is $bytes bytes (limit 5 MB)" >&2; exit 1; }
"$bin" stats "$out"
echo "fixtures written to $out ($bytes bytes, $pairs mined pairs)"
