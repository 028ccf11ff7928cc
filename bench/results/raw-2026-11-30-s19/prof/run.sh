#!/usr/bin/env bash
# Nineteenth session, first call: main 549bc43 (d7ffa1e's kernels) chunked-only bench, per-kernel
# ncu times, and the grad kernel's SASS-level stall profile at bench case 0 (1, 8192, 32).
# Device call: {"command": "bash bench/results/raw-2026-11-30-s19/prof/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 300}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
S=$(date +%s); el() { echo $(($(date +%s) - S)); }
tar xJf .carry/gpu.tar.xz
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=.carry/gpu/bin/cakegrad_kda_bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
KDA_BENCH_CHUNKED_ONLY=1 timeout 60 $B > "$OUT/bench_chunked.txt" 2>&1; tail -8 "$OUT/bench_chunked.txt"
echo "== bench at $(el) s"
KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 90 ncu --clock-control none \
  --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section SourceCounters --section Occupancy -k regex:KdaChunkGradKernel -c 1 -o /tmp/grad \
  $B > "$OUT/ncu_grad.log" 2>&1
timeout 20 ncu -i /tmp/grad.ncu-rep --page details > "$OUT/ncu_grad.txt" 2>&1
timeout 40 ncu -i /tmp/grad.ncu-rep --page source --csv --print-source sass > "$OUT/ncu_src.csv" 2>/dev/null
gzip -f "$OUT/ncu_src.csv"
grep -E "Duration|Warp Cycles Per Issued|Issued Ipc" "$OUT/ncu_grad.txt" | head
echo "== src profile at $(el) s"
for c in 0 1 2; do
  KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=$c timeout 40 ncu --metrics gpu__time_duration.sum \
    -k regex:Kda --launch-skip 36 -c 6 $B > "$OUT/ncu_kernels_case$c.txt" 2>&1
  echo "case $c:"; grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" "$OUT/ncu_kernels_case$c.txt" | paste - - | \
    sed -E 's/\(.*//; s/ +/ /g' | head -8
done
echo "== done at $(el) s"
