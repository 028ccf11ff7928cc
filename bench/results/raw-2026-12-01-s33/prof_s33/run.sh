#!/usr/bin/env bash
# prof_s33: line-level ncu source counters (warp states, stall samples) of backward_finish's token
# kernel (MhcBwdTokenKernel) at T = 16384, C = 4096, iters 20 (mhc bench --profile), main 91ac911's
# packaged build; map with the -lineinfo object of the same build (bench/ncu_sass_lines.py).
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof_s33/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 200}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
[ -x .carry/gpu/bin/cakegrad_mhc_bench ] || tar xJf .carry/gpu.tar.xz
O=${OUT:-/tmp/out}; mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
B=.carry/gpu/bin/cakegrad_mhc_bench
for k in MhcBwdTokenKernel MhcBwdColumnsTcKernel; do
  timeout 100 ncu --import-source no --kernel-name-base demangled \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    -k regex:$k -c 1 -o /tmp/$k $B --profile > "$O/ncu_$k.log" 2>&1
  timeout 30 ncu -i /tmp/$k.ncu-rep --page details --print-details all > "$O/ncu_$k.txt" 2>&1
  timeout 60 ncu -i /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
  gzip -c /tmp/src.csv > "$O/src_$k.csv.gz"
  python3 bench/ncu_sass_segments.py /tmp/src.csv > "$O/segments_$k.txt" 2>&1
  echo "== $k"; head -3 "$O/segments_$k.txt"
done
