#!/usr/bin/env bash
# mhc39 (twenty-third session): the split-K forward_stats' coefficient kernel beside the split-K
# kernel. cand4 = mhc37's (coefficient kernel after it, rank fold inside); cand6 = cand4 + a
# counter a stage (zeroed by a memset node, a GPU-scope release add by each rank CTA once the
# stage's partials are stored), the coefficient kernel launched as a programmatic dependent whose
# blocks wait for their stage's 16 ranks (acquire) instead of the grid. 3 alternating bench rounds
# at T = 4096, 8192, 16384; the suite and both sanitizers on cand6; the backward hash gate.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc39
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand4 cand6" cand6 4096,8192,16384
cat "$AB_OUT/ab/hash_gate.txt"
grep -B2 -A8 "Race\|Warning\|ERROR" "$AB_OUT"/ab/racecheck_cand6.log | head -30
ab_pack; echo "== done at $(ab_el) s"
