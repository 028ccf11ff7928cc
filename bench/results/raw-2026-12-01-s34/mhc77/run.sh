#!/usr/bin/env bash
# mhc77 (thirty-fourth session): dbuf (two dxmap buffers, one barrier a stage, 3 slots) against
# one dxmap buffer with two barriers a stage and 3 slots (s31) or 4 slots (s41); base main 6a4704f.
# s31 / s41 are dbuf (033624d) with the traits <64, 3, 1> / <64, 4, 1> (the *_vs_dbuf.diff here).
# Build here:
#   bash tools/gpu/build_ab_carry.sh mhc77 mhc "kernels/cuda/mhc_backward.cu kernels/cuda/mhc_common.cuh" \
#     base=git:main dbuf=git:mhc-col-dbuf s31=git:mhc-col-s31 s41=git:mhc-col-s41
# Device call: {"command": "bash bench/results/raw-2026-12-01-s34/mhc77/run.sh",
#   "carry": [".carry/mhc77x"], "timeout_s": 480}
exec bash tools/gpu/mhc_ab_call.sh mhc77 "base dbuf s31 s41" "s31 s41"
