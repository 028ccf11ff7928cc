#!/usr/bin/env bash
# Call mhc95 (fortieth session): forward_prepare's cluster kernel with the cluster sums moved from
# the 8 MMA warps to the U warps (branch mhc-usum). prof94 found the MMA warps spending about a
# quarter of their samples on those sums (16 DSMEM loads a thread, after the cluster wait) and
# the U warps half idle waiting for them. Now the MMA warps only multiply and sum their CTA (wait
# s, CTA sum s + 1 into the parity stage s - 1 used, arrive s + 1); the U warps wait s, sum stage
# s's 16 partials in rank order (z_0..3 and sq of every token, z_4..23 of the own tokens: the same
# sums as before), arrive s + 1, then pre, the own tokens' m and r for stats, U and the refill.
# The zs_full / zs_empty hand-over between the two groups is gone. Same bits by construction.
#   usum:  4 U warps (136 registers), as main
#   usum8: 8 U warps (72 registers, U items 2 at a time, the first 128 compute pre)
# Build (as run, main was d7aae0c; usum8's source is d7aae0c's mhc_forward.cu with usum8.diff):
#   git show d7aae0c:kernels/cuda/mhc_forward.cu > /tmp/usum8.cu
#   patch /tmp/usum8.cu bench/results/raw-2026-12-02-s40/mhc95/usum8.diff
#   bash tools/gpu/build_ab_carry.sh mhc95 mhc kernels/cuda/mhc_forward.cu base=git:d7aae0c
#   usum=git:71d8ce9 usum8=/tmp/usum8.cu
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc95/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc95/run.sh", "carry": [".carry/mhc95x"]}
# Read: the hash gate (both variants' lines all equal base's), the suites and the four sanitizers,
# forward_prepare at T = 4096 / 16384 (5 rounds), ncu of the forwards.
ROUNDS=5 HIDE='backward_' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc95 "base usum usum8" \
  "usum usum8" 0 4096,16384 'MhcFwd(Cluster|Coef)' 2>&1 |
  grep -E "forward_|PASSED|FAILED|SUMMARY|hashes|Duration|Throughput|rc=|ERROR|error"
