#!/usr/bin/env bash
# Runs the chunked KDA backward's CUDA kernels on the host: their source, unchanged up to the host
# launchers, compiled by g++ against cuda_host_shim.h (one std::thread per CUDA thread,
# std::barrier for __syncthreads and warp shuffles, mma.sync m16n8k16 and cp.async emulated),
# and compared with the FP64 sequential reference. First kernels 2-4 (chain, per-chunk pass,
# reduce) on records and chunk-start states built in FP64, then all four launches (the forward's
# preparation and checkpoint state pass included). Checks index arithmetic, fragment layouts and
# the barrier structure without a GPU; not races, not device arithmetic or timing.
# Usage (repo root): bash tools/emu/run_kda_chunked_backward_emu.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
out=${OUT:-/tmp/kda_emu}
mkdir -p "$out"
# The kernels, up to their host launchers, made host-compilable (emu_transform.py).
python3 tools/emu/emu_transform.py backward kernels/cuda/kda_chunked_backward.cu > "$out/kern_emu.inc"
python3 tools/emu/emu_transform.py forward kernels/cuda/kda_chunked_forward.cu > "$out/fwd_emu.inc"
# The FP64 chunk quantities (Prepare) of the host port.
awk '/^constexpr int C = 64;/{f=1} /^\/\/ The per-chunk pass \(KdaChunkGradKernel\)/{f=0} f' \
  tests/kernels/kda_chunked_backward_math_test.cc > "$out/prep.inc"
g++ -std=c++20 -O2 -w -Ikernels/include -Ikernels -Ikernels/cuda -I/usr/local/cuda/include \
  -Itools/emu -I"$out" tools/emu/kda_chunked_backward_emu.cc tools/emu/kda_chunked_forward_emu.cc \
  kernels/reference/kda_reference.cc \
  -o "$out/kda_chunked_backward_emu" -lpthread
# Records and S0 built in FP64 (kernels 2-4 alone), then from the emulated launch 1 (all four).
# The three cases run the reverse chain's 16-, 32- and 64-row slices in turn.
for src in fp64 kernels; do
  "$out/kda_chunked_backward_emu" init 0 $src 16
  "$out/kda_chunked_backward_emu" noinit 0 $src 32
  "$out/kda_chunked_backward_emu" init -6 $src 64
done
