#!/usr/bin/env bash
# Thirty-fifth session, call l2prof: where backward_finish's column kernel is bound, at the bench's
# clocks. ncu raw pages (SpeedOfLight, MemoryWorkloadAnalysis, WarpStateStats) of the column kernel
# of main (base) and of the l2x diagnostic (X and dU read from 512 L2-resident tokens: timing only)
# and of main's token kernel. Carry built for mhc82 (`tools/gpu/build_ab_carry.sh mhc82 mhc
# "kernels/cuda/mhc_backward.cu kernels/reference/mhc_layout.h kernels/reference/mhc_workspace.cc"
# base=git:main pdl2=git:mhc-pdl2 l2x=git:mhc-l2x`).
# Device call: {"command": "bash bench/results/raw-2026-12-01-s35/l2prof/run.sh",
#   "carry": [".carry/mhc82x"], "timeout_s": 240}
set -uo pipefail
OUT=${OUT:-/tmp/out}
tar xJf .carry/mhc82x/mhc82.tar.xz -C .carry
D=$PWD/.carry/mhc82
prof() {  # variant kernel-regex tag
  timeout 90 ncu --clock-control none -k "regex:$2" -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --page raw \
    "$D/$1/cakegrad_mhc_bench" --profile > "$OUT/raw_$3.txt" 2>&1
  echo "== $3 rc=$?"
  grep -E "gpu__time_duration.sum|dram__throughput.avg.pct|lts__throughput.avg.pct|l1tex__throughput.avg.pct|sm__throughput.avg.pct|lts__t_sectors_op_(read|write).sum |lts__t_sector_hit_rate.pct|issue_stalled_[a-z_]*_per_warp_active.pct" "$OUT/raw_$3.txt" | head -60
}
prof base MhcBwdColumns col_base
prof l2x MhcBwdColumns col_l2x
prof base MhcBwdToken tok_base
