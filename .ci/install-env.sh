#!/usr/bin/env bash
# Installs what the live-environment tests need, idempotently:
#  - Chromium (Debian package `chromium`, /usr/bin/chromium)
#  - the MiniWoB++ pages (PyPI wheel miniwob==1.1.0, MIT), unpacked into
#    $RMSWEB_MINIWOB_DIR or ~/.cache/rmsweb/miniwob (the html tree: core/, miniwob/, ...)
#  - a TrueType font for the recipe report's figures (Debian fonts-dejavu-core)
set -euo pipefail
MINIWOB_VERSION=1.1.0
dir="${RMSWEB_MINIWOB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rmsweb/miniwob}"

if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "install-env: chromium is missing and apt-get is not usable as root; install it by hand" >&2
    exit 1
  fi
fi

if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] \
   && [ ! -f /usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf ] \
   && [ -z "${RMSWEB_FONT:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-dejavu-core >/dev/null
  else
    echo "install-env: no TrueType font for the report figures; install fonts-dejavu-core or set RMSWEB_FONT" >&2
  fi
fi

if [ -f "$dir/core/core.js" ] && [ -f "$dir/miniwob/click-button.html" ] \
   && [ "$(cat "$dir/.rmsweb-miniwob-version" 2>/dev/null)" = "$MINIWOB_VERSION" ]; then
  echo "install-env: MiniWoB++ $MINIWOB_VERSION already in $dir"
  exit 0
fi

py=python3
command -v "$py" >/dev/null || py=python
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" -m pip download --no-deps --quiet "miniwob==$MINIWOB_VERSION" -d "$work"
whl="$(ls "$work"/miniwob-*.whl | head -n1)"
"$py" -m zipfile -e "$whl" "$work/unpacked"
test -f "$work/unpacked/miniwob/html/core/core.js"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
cp -r "$work/unpacked/miniwob/html" "$dir"
echo "$MINIWOB_VERSION" > "$dir/.rmsweb-miniwob-version"
echo "install-env: MiniWoB++ $MINIWOB_VERSION installed in $dir"
