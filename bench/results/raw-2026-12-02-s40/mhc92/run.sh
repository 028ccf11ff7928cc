#!/usr/bin/env bash
# Call mhc92 (fortieth session): the forwards' C = 4096 kernel (MhcFwdClusterKernel, split-K for
# forward_stats and clusters for forward_prepare) issues its first kStages tensor copies of X
# right after thread 0 initializes the barriers, before the warps load and split fn's fragments
# (~192 KB of L2 reads a CTA), instead of after them. backward_finish's column kernel already
# starts this way. Same bits by construction (the same copies, earlier).
# Build: bash tools/gpu/build_ab_carry.sh mhc92 mhc kernels/cuda/mhc_forward.cu base=git:main early=git:mhc-early-x
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc92/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc92/run.sh", "carry": [".carry/mhc92x"]}
# Read: the hash gate (early's lines all equal base's), the suite and the four sanitizers on
# early, forward_stats / forward_prepare at T = 4096 / 16384 (5 rounds) and ncu of the forwards.
ROUNDS=5 HIDE='backward_' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc92 "base early" "early" 0 \
  4096,16384 'MhcFwd(Cluster|Coef)' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|ERROR|error"
