#!/usr/bin/env bash
# Rebuilds tests/data/mocksites/ (the mock-site test dataset; it was fixtures/ before
# fixtures/ came from MiniWoB runs, see collect.sh) from the sources in this folder:
#   1. gen.py writes mock HTML pages of six sites,
#   2. headless Chromium screenshots them (640x400) and reads back element boxes,
#   3. gen.py writes Browser Use histories (three layouts) that use those screenshots,
#   4. `rmsweb import browser-use` imports each task folder into tests/data/mocksites/.
# Needs python3 and chromium (apt-get install -y chromium fonts-dejavu-core).
# Usage: fixtures-src/build.sh [OUT_DATASET]   (default: tests/data/mocksites/)
# Its mined pairs: rmsweb mine --dataset tests/data/mocksites --config fixtures-src/mine.toml
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
out="${1:-$repo/tests/data/mocksites}"
work="$here/build"
rm -rf "$work"
mkdir -p "$work"
python3 "$here/gen.py" pages "$work"
chrome="$(command -v chromium || command -v chromium-browser || command -v google-chrome)"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
for html in "$work"/pages/*.html; do
  png="${html%.html}.png"
  "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$profile" \
    --screenshot="$png" --window-size=640,400 "file://$html" >/dev/null 2>&1
  [ -s "$png" ] || { echo "no screenshot for $html" >&2; exit 1; }
  "$chrome" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$profile" \
    --dump-dom --window-size=640,400 "file://$html" >"${html%.html}.dom" 2>/dev/null
done
python3 "$here/gen.py" bboxes "$work"
# Smaller PNGs when an optimizer is installed (optional).
if command -v pngquant >/dev/null; then
  pngquant --force --skip-if-larger --ext .png --quality 70-95 "$work"/pages/*.png || true
fi
python3 "$here/gen.py" histories "$work"
rm -rf "$out"
cargo build --quiet --manifest-path "$repo/Cargo.toml"
bin="${CARGO_TARGET_DIR:-$repo/target}/debug/rmsweb"
for dir in "$work"/histories/*/; do
  "$bin" import browser-use "$dir" --dataset "$out"
done
# dataset.toml: fixed name and date so rebuilds only differ where content does.
cat > "$out/dataset.toml" <<TOML
name = "fixtures"
schema = 1
created_at = "2026-01-01T00:00:00Z"
notes = "Built by fixtures-src/build.sh: six mock sites, successes and failures of one task each, imported from Browser Use histories."
TOML
echo "fixtures written to $out ($(du -sh "$out" | cut -f1))"
