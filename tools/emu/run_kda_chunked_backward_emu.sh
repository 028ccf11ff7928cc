#!/usr/bin/env bash
# Runs the chunked KDA backward's CUDA kernels 2-4 (kernels/cuda/kda_chunked_backward.cu: the
# reverse chain, the per-chunk pass, the reduce) on the host: their source, unchanged, compiled by
# g++ against cuda_host_shim.h (one std::thread per CUDA thread, std::barrier for __syncthreads
# and warp shuffles), fed with chunk records and chunk-start states built in FP64, and compared
# with the FP64 sequential reference. Checks index arithmetic and barrier structure without a
# GPU; not races, not the tensor-core preparation / state pass, not device numerics.
# Usage (repo root): bash tools/emu/run_kda_chunked_backward_emu.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_emu}
mkdir -p "$out"
# The kernels: everything up to the close of the anonymous namespace (the host launcher after it
# uses <<< >>>), with shared memory as function statics / one static buffer.
awk '/^}  \/\/ namespace$/ {print; exit} {print}' kernels/cuda/kda_chunked_backward.cu |
  sed -e 's/extern __shared__ __align__(16) unsigned char smem_raw\[\];/unsigned char* smem_raw = g_dyn_smem;/' \
      -e 's/__shared__ /static /' > "$out/kern_emu.inc"
# The FP64 chunk quantities (Prepare) of the host port.
awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
  tests/kernels/kda_chunked_backward_math_test.cc > "$out/prep.inc"
g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
  -Itools/emu -I"$out" tools/emu/kda_chunked_backward_emu.cc kernels/reference/kda_reference.cc \
  -o "$out/kda_chunked_backward_emu" -lpthread
"$out/kda_chunked_backward_emu"
"$out/kda_chunked_backward_emu" noinit
"$out/kda_chunked_backward_emu" init -6
