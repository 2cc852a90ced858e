#!/usr/bin/env bash
# Builds the release binary with the `cuda` feature on a machine without a GPU:
# installs the pinned CUDA 13.0 toolchain (scripts/cuda-toolkit.sh), then runs
# `cargo build --release --features cuda` for compute capability 9.0 (H100/H200).
#
#   scripts/build-cuda.sh [extra cargo args]
#
# Environment: RMSWEB_CUDA_PREFIX (toolkit prefix), CUDA_COMPUTE_CAP (default 90),
# CARGO_TARGET_DIR (default target), NICE (default 10), CUDAFORGE_THREADS (nvcc jobs,
# default: all cores). The binary lands in $CARGO_TARGET_DIR/release/rmsweb; it needs the
# NVIDIA driver (libcuda.so.1) and the CUDA 13 libraries (cudart, cublas, cublasLt,
# curand, nvrtc) on the library path when it starts; see scripts/gpu-check.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."

want_cap=${CUDA_COMPUTE_CAP:-90}
eval "$("$here/cuda-toolkit.sh")"
export CUDA_COMPUTE_CAP=$want_cap

start=$(date +%s)
nice -n "${NICE:-10}" cargo build --release --features cuda "$@"
end=$(date +%s)

bin=${CARGO_TARGET_DIR:-target}/release/rmsweb
echo "build-cuda: built $bin in $((end - start)) s (compute capability $CUDA_COMPUTE_CAP)" >&2
needed=$(readelf -d "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "build-cuda: needed libraries: $needed" >&2
