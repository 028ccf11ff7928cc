#!/usr/bin/env bash
# Configures and builds everything into build/ (CMake + Ninja). CUDA kernels are compiled for
# sm_90a whenever nvcc is found (set CUDACXX or put nvcc on PATH); pass -DCAKEGRAD_ENABLE_CUDA=OFF
# to skip them. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
