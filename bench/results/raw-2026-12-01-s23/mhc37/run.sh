#!/usr/bin/env bash
# mhc37 (twenty-third session): the split-K forward_stats' fold. cand2 = mhc36's (fold kernel, a
# warp a token), cand3 = the fold inside the coefficient kernel, cand4 = cand3 + X streamed
# evict-first, the partials stored evict-last and discarded from L2 after the fold. Per-kernel ncu
# durations (clocks and caches not controlled) at T = 4096, 16384; 3 alternating bench rounds;
# the suite and both sanitizers on cand4, the backward hash gate.
set -uo pipefail
source tools/gpu/ab_extras.sh
ab_call mhc37
for v in cand3 cand4; do
  for t in 4096 16384; do
    MHC_BENCH_T=$t timeout 60 ncu --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      -k regex:MhcFwd -c 4 $D/$v/cakegrad_mhc_bench > "$AB_OUT/ncu_${v}_$t.txt" 2>&1
    echo "== $v T=$t"
    grep -E "^  [a-zA-Z]|^    (gpu__time|dram__)" "$AB_OUT/ncu_${v}_$t.txt" | grep -v "==PROF" |
      sed -E 's/^ +//; s/^.*(MhcFwd[A-Za-z]*).*$/\1/; s/ +/ /g'
  done
done
echo "== ncu done at $(ab_el) s"
HASH_FILTER='MhcKernels.BackwardHashesForCrossBuildComparison' \
  ab_mhc_bench $D "base cand2 cand3 cand4" cand4 4096,16384
cat "$AB_OUT/ab/hash_gate.txt"
ab_pack; echo "== done at $(ab_el) s"
