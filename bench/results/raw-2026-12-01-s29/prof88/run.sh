#!/usr/bin/env bash
# prof88: the grad kernel of main a39cb0d (kda87's tv build) at bench case 0 (1, 8192, 32): ncu
# source counters (SASS) for a phase-level profile (bench/ncu_sass_segments.py), and a static
# SASS listing to map phases to source.
# Device call: {"command": "tar xJf .carry/kda87x/kda87.tar.xz -C .carry && bash .carry/prof88/run.sh",
#   "carry": [".carry/kda87x", ".carry/prof88"], "timeout_s": 300}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
C=.carry/kda87
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$C/tv/cakegrad_kda_bench
KDA_BENCH_CHUNKED_ONLY=1 KDA_BENCH_CASES=0 timeout 120 ncu --import-source no \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section InstructionStats -k regex:KdaChunkGradKernel -c 1 -o /tmp/grad $B > "$O/ncu_grad.log" 2>&1
timeout 30 ncu -i /tmp/grad.ncu-rep --page details > "$O/ncu_grad.txt" 2>&1
timeout 60 ncu -i /tmp/grad.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
python3 bench/ncu_sass_segments.py /tmp/src.csv > "$O/segments.txt" 2>&1
gzip -c /tmp/src.csv > "$O/ncu_src.csv.gz"
grep -E "Duration|Issued Ipc|Executed Ipc|Warp Cycles Per Issued" "$O/ncu_grad.txt" | head
head -40 "$O/segments.txt"
