#!/usr/bin/env bash
# mhc69: what the single-pass kernel's frame costs. base = main e402996; nwB = b53d076 (no
# cross-CTA waits, no slice sums; sync warp group present, consumers at 112 registers); nosync =
# 5b4ad3d669cabefffc50e85a4f512da33a95b066 (nwB without the sync warp group: 512 threads, 128 registers, no record waits). Wrong
# results, timing only.
set -uo pipefail
C=.carry/mhc69
O=${OUT:-/tmp}/mhc69
mkdir -p "$O"
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
for r in 1 2; do
  for v in base nwB nosync; do
    timeout 40 $C/$v/cakegrad_mhc_bench > "$O/bench_${v}_$r.txt" 2>&1
    grep -E "^\| backward_finish " "$O/bench_${v}_$r.txt" | grep 16384 | sed "s/^/r$r $v /" | cut -c1-100
  done
done
for v in nwB nosync; do timeout 60 ncu --kernel-name regex:"MhcBwd(Fused|Columns)" --section SpeedOfLight $C/$v/cakegrad_mhc_bench --profile 2>&1 | grep -E "MhcBwd|Duration|DRAM Through|L1/TEX Cache" | sed "s/(unnamed.*//; s/^/$v /" | cut -c1-90; done
echo "== done at $(el) s"
