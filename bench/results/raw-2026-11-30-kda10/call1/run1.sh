#!/usr/bin/env bash
# kda10 call 1: main's (b9ce24b) state pass profiled: ncu --set full (WarpStateStats, SourceCounters
# with -lineinfo SASS) of one KdaChunkStateKernel launch at (1, 32768, 16) [16 rows] and
# (1, 8192, 32) [32 rows]; SASS page split at barriers by ncu_sass_segments.py.
set -uo pipefail
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"; O=$(mktemp -d)
pack() { tar czf "$FINAL/kda10_call1.tgz" -C "$O" .; }
D=.carry/kda10
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; ncu --version | tail -1; } | tee "$O/env.txt"
timeout 10 $D/copybw | tee "$O/copy.txt"
for cs in 1 0; do
  KDA_BENCH_FWD_ONLY=1 KDA_BENCH_CASES=$cs timeout 45 ncu --clock-control none --set full --import-source no \
    -k regex:KdaChunkState --launch-skip 3 -c 1 -o /tmp/st$cs $D/base/cakegrad_kda_bench > "$O/ncu_$cs.log" 2>&1
  echo "ncu case $cs rc=$? at $(el) s"
  ncu -i /tmp/st$cs.ncu-rep --page details > "$O/details_$cs.txt" 2>&1
  ncu -i /tmp/st$cs.ncu-rep --page source --csv --print-source sass > "$O/src_$cs.csv" 2>&1
  python3 $D/ncu_sass_segments.py "$O/src_$cs.csv" > "$O/segments_$cs.txt" 2>&1; cat "$O/segments_$cs.txt" | head -12
  grep -E "Duration|Issued Ipc|Eligible Warps|Warp Cycles Per Issued" "$O/details_$cs.txt" | head -6
  pack
done
echo "== done at $(el) s"
