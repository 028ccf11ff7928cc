#!/usr/bin/env bash
# mhc48 (twenty-fourth session): backward_finish's token kernel asks L2 for the groups of X and
# dU 2 / 4 / 8 steps (of 256 channels) ahead of its register-buffered next one
# (prefetch.global.L2): probe2 read its pattern at 4.2-4.3 TB/s at full occupancy, the kernel
# reads at 3.24 (16 warps an SM, one group in flight a warp). base = main c17beb3; pf2, pf4, pf8.
# Same bits (hash gate); 3 alternating rounds at T = 4096, 16384; suite + sanitizers on pf4.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc48
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base pf2 pf4 pf8" pf4 4096,16384 'forward_\|backward_prepare\|prepare+finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
