#!/usr/bin/env bash
# Call mhc93 (fortieth session): forward_prepare's cluster kernel with 8 U warps instead of 4
# (setmaxnreg: MMA warps 184 registers as before, U warps 72 instead of 136; U items loaded 2 at a
# time instead of 4; the first 128 U threads compute pre). A stage's X buffer is refilled only
# after its U, so a faster U shortens every buffer's cycle. Same bits by construction.
# Build: bash tools/gpu/build_ab_carry.sh mhc93 mhc kernels/cuda/mhc_forward.cu base=git:main u8=git:mhc-u8
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc93/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc93/run.sh", "carry": [".carry/mhc93x"]}
# Read: the hash gate (u8's lines all equal base's), the suite and the four sanitizers on
# u8, forward_stats / forward_prepare at T = 4096 / 16384 (5 rounds) and ncu of the forwards.
ROUNDS=5 HIDE='backward_' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc93 "base u8" "u8" 0 \
  4096,16384 'MhcFwd(Cluster|Coef)' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|ERROR|error"
