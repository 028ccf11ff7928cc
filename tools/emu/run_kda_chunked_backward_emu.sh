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
bash tools/emu/build_kda_bwd_emu.sh tools/emu/kda_chunked_backward_emu.cc "$out" kda_chunked_backward_emu
# Records and S0 built in FP64 (kernels 2-4 alone), then from the emulated launch 1 (all four).
# The three cases run the reverse chain's 16-, 32- and 64-row slices in turn (its cluster
# instance); a last case its plain fallback, which must give the bits of the first kernels case.
for src in fp64 kernels; do
  "$out/kda_chunked_backward_emu" init 0 $src 16
  "$out/kda_chunked_backward_emu" noinit 0 $src 32
  "$out/kda_chunked_backward_emu" init -6 $src 64
done
echo "plain fallback (the first kernels case's hash again):"
EMU_CHAIN_PLAIN=1 "$out/kda_chunked_backward_emu" init 0 kernels 16
