#!/usr/bin/env bash
# Call mhc97 (fortieth session): forward_prepare's register split after the U warps took the
# cluster sums (mhc95). The MMA warps no longer hold the sums' 16 DSMEM values, so they may need
# fewer than 184 registers; the U warps, now the stage's longer chain, get what they give up.
#   base:   main (MMA 184 / U 72, U items 2 at a time)
#   r168b4: MMA 168 / U 88, U items 4 at a time
#   r168b2: MMA 168 / U 88, U items 2 at a time
# Build (as run, main's kernel was 9948713's; each variant is that mhc_forward.cu with its diff):
#   for v in r168b4 r168b2; do git show 9948713:kernels/cuda/mhc_forward.cu > /tmp/$v.cu;
#     patch /tmp/$v.cu bench/results/raw-2026-12-02-s40/mhc97/$v.diff; done
#   bash tools/gpu/build_ab_carry.sh mhc97 mhc kernels/cuda/mhc_forward.cu base=git:9948713
#   r168b4=/tmp/r168b4.cu r168b2=/tmp/r168b2.cu
#   (EXTRA=bench/results/raw-2026-12-02-s40/mhc97/run.sh)
# Device call: {"command": "bash bench/results/raw-2026-12-02-s40/mhc97/run.sh", "carry": [".carry/mhc97x"]}
ROUNDS=5 HIDE='backward_' NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc97 "base r168b4 r168b2" \
  "r168b4 r168b2" 0 4096,16384 'MhcFwdClusterKernel' 2>&1 |
  grep -E "forward_prepare|PASSED|FAILED|SUMMARY|hashes|Duration|rc=|ERROR|error"
