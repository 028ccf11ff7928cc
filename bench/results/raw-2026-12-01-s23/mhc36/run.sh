#!/usr/bin/env bash
# mhc36 (twenty-third session): where mhc35's split-K forward_stats loses. Per-kernel durations
# (ncu, clocks and caches not controlled, the bench's first two forward_stats calls at each T) of
# main, mhc35 (partials [rank][v][t], a thread a token in the fold) and cand2 (partials
# [rank][t][v], a warp a token); then 3 alternating bench rounds of the three at T = 4096, 16384,
# the suite and both sanitizers on cand2, the backward hash gate.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc36
for v in base cand cand2; do
  for t in 4096 16384; do
    MHC_BENCH_T=$t timeout 60 ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      -k regex:MhcFwd -c 8 $D/$v/cakegrad_mhc_bench > "$AB_OUT/ncu_${v}_$t.txt" 2>&1
    echo "== $v T=$t"
    grep -v '==PROF==' "$AB_OUT/ncu_${v}_$t.txt" | grep -E "MhcFwd[A-Za-z]*Kernel|gpu__time|dram__" |
      sed -E 's/\(int, int, int\)x\(int, int, int\)//; s/ +/ /g' | paste - - - | cut -c1-200
  done
done
echo "== ncu done at $(ab_el) s"
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand cand2" cand2 4096,16384
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
