#!/usr/bin/env bash
# mhc38 (twenty-third session): the split-K forward_stats' fixed cost. cand4 = mhc37's; cand5a =
# cand4 + its first X stages requested before fn's fragments are loaded; cand5 = cand5a + the
# coefficient kernel launched as a programmatic dependent (griddepcontrol). ncu sections of cand5's
# coefficient kernel at T = 16384; 3 alternating bench rounds at T = 4096, 16384; the suite and
# both sanitizers on cand5, the backward hash gate.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc38
MHC_BENCH_T=16384 timeout 90 ncu --clock-control none --cache-control none \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis -k regex:MhcFwdCoef --launch-skip 1 -c 1 \
  $D/cand5/cakegrad_mhc_bench > "$AB_OUT/ncu_coef_cand5.txt" 2>&1
grep -E "Duration|Throughput|Registers|Achieved|Theoretical Occ|Stall|Warp Cycles|Issued|L2 Hit|Block Limit" \
  "$AB_OUT/ncu_coef_cand5.txt" | head -40
echo "== ncu done at $(ab_el) s"
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand4 cand5a cand5" cand5 4096,16384
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
