#!/usr/bin/env bash
# mhc66: the single-pass consumers' own cost. nw2 = abdef85 (no cross-CTA waits); nwA = nw2 without
# the slice sums' arithmetic (7c2f285df56070f65b71bb1baad9bfcf7e1d1578); nwB = nwA without their shared loads (b53d076deb2693c4f42b83926ce4a900a3c48dd3). Wrong results,
# timing only; base = main 65d05d6.
set -uo pipefail
C=.carry/mhc66
O=${OUT:-/tmp}/mhc66
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for r in 1 2; do
  for v in base nw2 nwA nwB; do
    timeout 40 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish" "$O/bench_${v}_$r.txt" | grep 16384 | sed "s/^/r$r $v /" | cut -c1-100
  done
done
timeout 60 ncu --kernel-name regex:"MhcBwd(Fused|Columns)" --section SpeedOfLight --section WarpStateStats $C/nwB/cakegrad_mhc_bench --profile > "$O/ncu_nwB.txt" 2>&1
grep -E "MhcBwd|Duration|DRAM Through|L1/TEX Cache|Warp Cycles Per Issued" "$O/ncu_nwB.txt" | sed "s/(unnamed.*//" | cut -c1-80
echo "== done at $(el) s"
