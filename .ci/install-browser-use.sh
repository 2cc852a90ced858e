#!/usr/bin/env bash
# Installs browser-use 0.13.14 into a cached venv, idempotently, for the test that runs
# Browser Use's own Agent against `rmsweb serve` and for tests/data/browser_use/generate.py:
#   $RMSWEB_BROWSER_USE_VENV or ~/.cache/rmsweb/venv-browser-use
set -euo pipefail
VERSION=0.13.14
venv="${RMSWEB_BROWSER_USE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rmsweb/venv-browser-use}"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.rmsweb-browser-use-version" 2>/dev/null)" = "$VERSION" ]; then
  echo "install-browser-use: browser-use $VERSION already in $venv"
  exit 0
fi
py=python3
command -v "$py" >/dev/null || py=python
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "browser-use==$VERSION"
"$venv/bin/python" -c "import browser_use" >/dev/null
echo "$VERSION" > "$venv/.rmsweb-browser-use-version"
echo "install-browser-use: browser-use $VERSION installed in $venv"
