#!/usr/bin/env bash
# mhc47 (twenty-fourth session): forward_stats' last 3% to 1.2x. base = main; p0 = tensor maps
# without L2 promotion (mhc45); c512 = p0 + the coefficient kernel in blocks of 512 threads (32
# tokens; 2048 -> 512 blocks at T = 16384); c512pdl = c512 + the coefficient kernel launched as a
# programmatic dependent, its launch triggered by the split-K CTAs at their last stage. All the
# same bits (hash gate). 3 alternating rounds at T = 4096, 8192, 16384; suite and sanitizers on
# c512pdl.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc47
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base p0 c512 c512pdl" c512pdl 4096,8192,16384 'backward_\|forward_finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
