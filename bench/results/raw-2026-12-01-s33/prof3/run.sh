#!/usr/bin/env bash
# prof3 (thirty-third session): ncu source counters and full sections of backward_finish's column
# and token kernels at T = 16384, C = 4096 (mhc bench --profile) from the final build 7c5099e
# (.carry/gpu.tar.xz), for the next instruction cuts. Map with the -lineinfo object of 7c5099e
# (bench/ncu_sass_lines.py).
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof3/run.sh",
#   "carry": [".carry/gpu.tar.xz"], "timeout_s": 240}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
[ -x .carry/gpu/bin/cakegrad_mhc_bench ] || tar xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:${LD_LIBRARY_PATH:-}
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=.carry/gpu/bin/cakegrad_mhc_bench
for k in MhcBwdColumnsTc MhcBwdToken; do
  timeout 100 ncu -f --import-source no --kernel-name-base demangled --set full \
    --section SourceCounters -k "regex:$k" -c 1 -o /tmp/$k $B --profile > "$O/ncu_$k.log" 2>&1
  timeout 30 ncu -i /tmp/$k.ncu-rep --page details > "$O/ncu_$k.txt" 2>&1
  timeout 60 ncu -i /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
  gzip -c /tmp/src.csv > "$O/src_$k.csv.gz"
  python3 bench/ncu_sass_segments.py /tmp/src.csv > "$O/segments_$k.txt" 2>&1
  echo "== $k"; grep -E "Duration|Issue Slots Busy|DRAM Throughput" "$O/ncu_$k.txt" | head -3; head -2 "$O/segments_$k.txt"
done
# The device tool returns a limited number of files: one archive holds them all.
tar czf /tmp/prof3.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/prof3.tgz "$O/"
