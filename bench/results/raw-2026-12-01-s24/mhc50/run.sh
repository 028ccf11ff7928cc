#!/usr/bin/env bash
# mhc50 (twenty-fourth session): forward_stats margin. base = main c17beb3; n4 = the split-K
# kernel multiplies its 4 token tiles at once (twice the independent MMA chains; 216 registers,
# no spill; same sums, same bits); n4xf = n4 + the first 3 X stages requested before fn's
# fragments are loaded. Same bits (hash gate); 3 alternating rounds at T = 4096, 8192, 16384;
# suite and both sanitizers on n4xf.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc50
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base n4 n4xf" n4xf 4096,8192,16384 'backward_\|forward_finish\|prepare+finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
