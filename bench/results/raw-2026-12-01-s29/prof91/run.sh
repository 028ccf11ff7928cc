#!/usr/bin/env bash
# prof91: line-level ncu source counters of the chunked backward's checkpoint preparation
# (KdaChunkPrepKernel<512, 1>) at bench case 0 (1, 8192, 32), final build b5d7f0d, for the next
# session's instruction cuts (map with the -lineinfo object of the same commit, as prof88).
# Device call: {"command": "bash bench/results/raw-2026-12-01-s29/prof91/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 120}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
[ -x .carry/gpu/bin/cakegrad_kda_bench ] || tar xJf .carry/gpu.tar.xz
O=${OUT:-/tmp/out}; mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
B=.carry/gpu/bin/cakegrad_kda_bench
KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 100 ncu --import-source no --kernel-name-base demangled \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  -k regex:'KdaChunkPrepKernel<.int.512, .bool.1>' -c 1 -o /tmp/prep $B > "$O/ncu_prep.log" 2>&1
timeout 30 ncu -i /tmp/prep.ncu-rep --page details > "$O/ncu_prep.txt" 2>&1
timeout 60 ncu -i /tmp/prep.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
gzip -c /tmp/src.csv > "$O/ncu_src.csv.gz"
python3 bench/ncu_sass_segments.py /tmp/src.csv > "$O/segments.txt" 2>&1
grep -E "KdaChunkPrep|Duration|Issued Ipc|Warp Cycles Per Issued|Registers" "$O/ncu_prep.txt" | head
head -12 "$O/segments.txt"
