#!/usr/bin/env bash
# Starts llama.cpp's OpenAI-compatible server (llama-cpp-python 0.3.36) on SmolLM2's
# GGUF, as the peer of `benches/serve.rs --peer`. Not used by the tests.
#
#   scripts/llama-cpp-peer.sh [PORT]   (default 8089; Ctrl-C stops it)
#
# The package has no Linux wheel on PyPI: the first run builds it from source into
# $RMSWEB_LLAMA_CPP_VENV or ~/.cache/rmsweb/venv-llama-cpp (about 5 min on 2 cores;
# needs gcc/g++; cmake and ninja come from PyPI). Later runs reuse the venv. It is
# built for AVX2 without AVX-512 or AMX: a `GGML_NATIVE` build on this machine's CPU
# (which reports AMX) died of a general protection fault in libggml-cpu on its first
# request.
#
# The server is started with `--interrupt_requests False`: by default a new request
# cuts the streamed answer in progress short (concurrent clients then get answers of
# a few tokens, which are not comparable), and with it off requests wait their turn.
set -euo pipefail
VERSION=0.3.36
PORT="${1:-8089}"
venv="${RMSWEB_LLAMA_CPP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/rmsweb/venv-llama-cpp}"
if ! { [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.rmsweb-llama-cpp-version" 2>/dev/null)" = "$VERSION" ]; }; then
  py=python3
  command -v "$py" >/dev/null || py=python
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    scikit-build-core cmake ninja
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation "llama-cpp-python[server]==$VERSION"
  "$venv/bin/python" -c "import llama_cpp.server" >/dev/null
  echo "$VERSION" > "$venv/.rmsweb-llama-cpp-version"
fi
gguf="$(bash "$(dirname "$0")/fetch-smollm2.sh" | sed -n 's/^gguf=//p')"
exec "$venv/bin/python" -m llama_cpp.server --model "$gguf" --n_ctx 8192 \
  --n_threads "$(nproc)" --n_threads_batch "$(nproc)" --interrupt_requests False \
  --host 127.0.0.1 --port "$PORT"
