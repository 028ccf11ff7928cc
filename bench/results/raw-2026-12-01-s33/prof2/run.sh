#!/usr/bin/env bash
# prof2 (thirty-third session): line-level ncu source counters of mHC kernels at T = 16384,
# C = 4096 (mhc bench --profile) from mhc73's imm build: backward_finish's column kernel, the
# forwards' split-K stats kernel and forward_prepare's cluster kernel with U. Map with the
# -lineinfo objects of mhc-col-imm (bench/ncu_sass_lines.py).
# Device call: {"command": "bash bench/results/raw-2026-12-01-s33/prof2/run.sh",
#   "carry": [".carry/mhc73x"], "timeout_s": 300}
set -uo pipefail
export PATH=$PATH:/usr/local/cuda/bin
tar xJf .carry/mhc73x/mhc73.tar.xz -C .carry
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=.carry/mhc73/imm/cakegrad_mhc_bench
prof() {  # TAG REGEX
  timeout 100 ncu -f --import-source no --kernel-name-base demangled \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    -k "regex:$2" -c 1 -o /tmp/$1 $B --profile > "$O/ncu_$1.log" 2>&1
  timeout 30 ncu -i /tmp/$1.ncu-rep --page details > "$O/ncu_$1.txt" 2>&1
  timeout 60 ncu -i /tmp/$1.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>/dev/null
  gzip -c /tmp/src.csv > "$O/src_$1.csv.gz"
  python3 bench/ncu_sass_segments.py /tmp/src.csv > "$O/segments_$1.txt" 2>&1
  echo "== $1"; grep -E "Duration|Issue Slots Busy|DRAM Throughput" "$O/ncu_$1.txt" | head -3; head -2 "$O/segments_$1.txt"
}
prof column 'MhcBwdColumnsTc'
prof splitk 'MhcFwdClusterKernel<.*bool.0>'
prof cluster_u 'MhcFwdClusterKernel<.*bool.1>'
# The device tool returns a limited number of files: one archive holds them all.
tar czf /tmp/prof2.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/prof2.tgz "$O/"
