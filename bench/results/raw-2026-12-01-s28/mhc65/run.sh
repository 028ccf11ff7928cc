#!/usr/bin/env bash
# mhc65: where the single-pass backward_finish waits. rot = 8cdac66 (mhc64's best); nw1 = rot whose
# finishing warps do not wait for the CTAs' sums (ef05074c35f33c79881f73fb3611f9b2e8e023f4); nw2 = nw1 whose loading warp does not
# wait for the finished records either (abdef852498b96e988a013a2ba4bc9b8bd6b0b6b). nw1 and nw2 give wrong results: timing only.
set -uo pipefail
C=.carry/mhc65
O=${OUT:-/tmp}/mhc65
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for r in 1 2; do
  for v in rot nw1 nw2; do
    timeout 40 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish " "$O/bench_${v}_$r.txt" | sed "s/^/r$r $v /" | cut -c1-100
  done
done
timeout 60 ncu --kernel-name regex:"MhcBwdFused" --section SpeedOfLight $C/nw2/cakegrad_mhc_bench --profile > "$O/ncu_nw2.txt" 2>&1
grep -E "Duration|DRAM Through|L1/TEX Cache" "$O/ncu_nw2.txt"
echo "== done at $(el) s"
