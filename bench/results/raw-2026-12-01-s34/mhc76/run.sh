#!/usr/bin/env bash
# mhc76 (thirty-fourth session): the column kernel with dxmap through two shared buffers and the
# epilogue a thread per (token, four channels) over all four streams (dbuf: branch mhc-col-dbuf,
# a077a1e; dbuf.diff here is main..033624d, the same kernel with the buffer count a trait) against
# main (6a4704f). A first run of this call with the stats box at stats[25] trapped (illegal
# instruction: that box start is not 16-byte aligned in global memory); a077a1e moved it back.
# Build here:
#   bash tools/gpu/build_ab_carry.sh mhc76 mhc "kernels/cuda/mhc_backward.cu kernels/cuda/mhc_common.cuh" \
#     base=git:main dbuf=git:mhc-col-dbuf
# Device call: {"command": "bash bench/results/raw-2026-12-01-s34/mhc76/run.sh",
#   "carry": [".carry/mhc76x"], "timeout_s": 420}
exec bash tools/gpu/mhc_ab_call.sh mhc76 "base dbuf" dbuf
