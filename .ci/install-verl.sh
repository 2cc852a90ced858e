#!/usr/bin/env bash
# Installs the Python venv the verl plugin tests need (python/tests), idempotently:
# verl 0.9.1 with its CPU dependencies, torch, pytest and maturin, in
# $RMSWEB_VERL_VENV or ~/.cache/rmsweb/venv-verl. Reused while python/requirements-ci.txt
# is unchanged (its hash is kept in the venv).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${RMSWEB_VERL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rmsweb/venv-verl}"
req=python/requirements-ci.txt
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.rmsweb-requirements" 2>/dev/null)" = "$want" ]; then
  echo "install-verl: venv already in $dir"
  exit 0
fi
py=python3
command -v "$py" >/dev/null || py=python
start=$SECONDS
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"$py" -m venv "$dir"
"$dir/bin/python" -m pip install --quiet uv
# uv resolves and downloads in parallel; it reads the system certificates like pip does.
SSL_CERT_FILE="${SSL_CERT_FILE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}" \
  "$dir/bin/uv" pip install --quiet --python "$dir/bin/python" -r "$req"
echo "$want" > "$dir/.rmsweb-requirements"
echo "install-verl: venv installed in $dir in $((SECONDS - start)) s"
