#!/usr/bin/env bash
# Records fixtures/runs/rl-tiny: a tiny Salvage-DS RL run on the bundled fixtures'
# own mined pairs, so that in the workbench its curriculum (Runs, `c`, Enter) leads
# to the fixtures' pairs and its rollouts (`o`) open in the Reward tab on their pages.
#   1. a tiny SFT run on a copy of fixtures/ (310 steps, ~2.5 min; its 50 MB of
#      checkpoints are not kept: run.toml's init names the folder it was in),
#   2. 12 RL steps from it on the mined prompts (~5 min), checkpoints dropped.
# Usage: fixtures-src/record-rl-run.sh   (RMSWEB_BIN overrides the binary; default:
# the release build, built when missing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
bin="${RMSWEB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/rmsweb}"
[ -x "$bin" ] || cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$repo/fixtures" "$work/fixtures"
rm -rf "$work/fixtures/runs"
cd "$work"
"$bin" train sft --preset tiny --dataset fixtures --run-dir sft-init --steps 400 \
  --set epochs=40 --set context=512 --set micro_batch=4 --set grad_accum=1 \
  --set checkpoint_every=0 >/dev/null
"$bin" train rl --preset tiny --init sft-init --dataset fixtures --run-dir rl-tiny \
  --set steps=12 --set max_new_tokens=128 --set checkpoint_every=0 >/dev/null
rm -rf rl-tiny/checkpoints
rm -rf "$repo/fixtures/runs/rl-tiny"
cp -r rl-tiny "$repo/fixtures/runs/rl-tiny"
echo "recorded $repo/fixtures/runs/rl-tiny ($(du -sh rl-tiny | cut -f1))"
