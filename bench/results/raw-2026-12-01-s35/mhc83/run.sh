#!/usr/bin/env bash
# Thirty-fifth session, call mhc83 (timing only): is backward_finish's column kernel bound by its
# shared-memory wavefronts? lds = main with the epilogue's four R loads a row replaced by values
# in registers and one dY load of four (wrong results by design; branch mhc-diag-lds). Carry:
# `tools/gpu/build_ab_carry.sh mhc83 mhc kernels/cuda/mhc_backward.cu base=git:main lds=git:mhc-diag-lds`.
# Device call: {"command": "bash bench/results/raw-2026-12-01-s35/mhc83/run.sh",
#   "carry": [".carry/mhc83x"], "timeout_s": 300}
set -uo pipefail
OUT=${OUT:-/tmp/out}
NCU_CLOCKS=none bash tools/gpu/mhc_ab_call.sh mhc83 "base lds" "" 1 16384 'MhcBwdColumns' 2>&1 |
  grep -E "backward_finish|Duration|DRAM|hashes" 
D=$PWD/.carry/mhc83
for v in base lds; do
  timeout 90 ncu --clock-control none -k regex:MhcBwdColumns -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --page raw \
    "$D/$v/cakegrad_mhc_bench" --profile > "$OUT/raw_col_$v.txt" 2>&1
  echo "== $v rc=$?"
  grep -E "gpu__time_duration.sum|dram__throughput.avg.pct|lts__throughput.avg.pct|l1tex__throughput.avg.pct|l1tex__data_pipe_lsu_wavefronts.avg.pct|sm__throughput.avg.pct|lts__t_tag_requests.avg.pct" "$OUT/raw_col_$v.txt"
done
