#!/usr/bin/env bash
# Renders docs/workbench.png, the README's picture: the release binary in a real
# terminal (tmux, 120x36, xterm-256color) on a copy of the bundled fixtures, Mined
# pairs tab; the captured screen with its colours (tmux capture-pane -e) becomes HTML
# (aha) and headless Chromium screenshots it. Run it after a change to the
# workbench's look. Needs tmux, aha, chromium and fonts-dejavu-core
# (apt-get install -y tmux aha chromium fonts-dejavu-core).
# Usage: scripts/workbench-picture.sh [OUT.png]   (default: docs/workbench.png)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-$repo/docs/workbench.png}")"
bin="${RMSWEB_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/rmsweb}"
[ -x "$bin" ] || cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
for tool in tmux aha; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }; done
chrome="$(command -v chromium || command -v chromium-browser || command -v google-chrome)"
work="$(mktemp -d)"
sock="rmsweb-picture-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
cp -r "$repo/fixtures" "$work/fixtures"
rm -f "$work/fixtures/annotations.jsonl"
cols=120 rows=36
TERM=xterm-256color tmux -L "$sock" new-session -d -s pic -x "$cols" -y "$rows" \
  "exec env RMSWEB_PICKER=halfblocks $bin --dataset $work/fixtures --annotator you --runs $work/fixtures/runs"
wait_for() {
  for _ in $(seq 1 200); do
    tmux -L "$sock" capture-pane -p -t pic | grep -q -- "$1" && return 0
    sleep 0.1
  done
  echo "the workbench never showed \`$1\`" >&2
  exit 1
}
wait_for "1 Trajectories"
tmux -L "$sock" send-keys -t pic 2
wait_for "Queue 0/"
wait_for "Status: pending"
sleep 0.5
tmux -L "$sock" capture-pane -e -p -t pic > "$work/screen.ansi"
aha --black --title "rmsweb workbench" < "$work/screen.ansi" > "$work/screen.html"
# One font, no margins, lines exactly one cell high.
sed -i 's|<pre>|<style>body{margin:0;background:#000}pre{margin:8px;font:14px/17px "DejaVu Sans Mono",monospace}</style><pre>|' "$work/screen.html"
width=$(( cols * 85 / 10 + 16 ))
height=$(( rows * 17 + 16 ))
"$chrome" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size="$width,$height" \
  --screenshot="$out" "file://$work/screen.html" >/dev/null 2>&1
[ -s "$out" ] || { echo "no picture written" >&2; exit 1; }
echo "wrote $out (${width}x${height})"
