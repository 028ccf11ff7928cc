#!/usr/bin/env bash
# mhc71 (thirty-third session): what limits backward_finish's token kernel. Variants against main
# 91ac911: addr (mhc70's, c5642a9), o5 (addr at __launch_bounds__(128, 5): 5 CTAs an SM, 96
# registers, 88 B of spills), pre2 (addr with the second buffer's load before the Sinkhorn chain).
# Hash gate, 3 alternating bench rounds at T = 4096, 16384, the mHC suite and both sanitizers on
# CHECK, ncu of the token and column kernels. The call ran these steps as an inline script (git show
# c598d63:bench/results/raw-2026-12-01-s33/mhc71/run.sh); tools/gpu/mhc_ab_call.sh holds them now.
# Built here: bash tools/gpu/build_ab_carry.sh mhc71 mhc kernels/cuda/mhc_backward.cu \
#   base=git:91ac911 addr=git:c5642a9 o5=/tmp/v_o5.cu pre2=/tmp/v_pre2.cu
# o5 and pre2: mhc71/*_vs_addr.diff applied to mhc-tok-addr.
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/mhc71/run.sh",
#   "carry": [".carry/mhc71x"],
#   "timeout_s": 540}
exec bash tools/gpu/mhc_ab_call.sh mhc71 "base addr o5 pre2" pre2
