#!/usr/bin/env bash
# mhc44 (twenty-third session): backward_finish's column kernel as one CTA an SM walking its token
# chunks (64 column blocks x 2 at C = 4096 on the H200, 4 chunks each), the TMA ring running on
# across chunk boundaries, instead of 512 CTAs in 3.88 waves (each paying fn's split and the
# ring's fill). Each chunk's dfn partial from fresh accumulators: the same bits (hash gate).
# 3 alternating bench rounds at T = 4096, 8192, 16384; suite and both sanitizers on cand.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc44
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand" cand 4096,8192,16384 'forward_\|backward_prepare\|prepare+finish'
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
