#!/usr/bin/env bash
# prof73: where the FP64 sequential backward's time goes at a few heads (B = 1, T = 8192, H = 1;
# kda72's fp64 binary = e89a6cf). Per-kernel times of one backward, then the backward kernel's
# warp states and per-SASS-line stall samples.
set -uo pipefail
B=.carry/kda72/fp64/cakegrad_kda_bench
export KDA_BENCH_CASES=0 KDA_BENCH_H=1
timeout 120 ncu --metrics gpu__time_duration.sum -k regex:"KdaRecompute|KdaBackwardKernel|KdaParamReduce" \
  --launch-skip 3 -c 3 $B > $OUT/times.txt 2>&1
grep -E "Kda[A-Za-z]*Kernel|gpu__time_duration" $OUT/times.txt | grep -v PROF
timeout 240 ncu --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --section SourceCounters --import-source no \
  -k regex:KdaBackwardKernel --launch-skip 1 -c 1 -o $OUT/bwd $B > $OUT/prof_log.txt 2>&1
ncu --import $OUT/bwd.ncu-rep --print-details all > $OUT/bwd_details.txt 2>&1
ncu --import $OUT/bwd.ncu-rep --page source --csv --print-source sass > $OUT/bwd_sass.csv 2>&1
grep -E "Warp Cycles|Issued Warp|Eligible|Active Warps|No Eligible|Stall|stall" $OUT/bwd_details.txt | head -40
wc -l $OUT/bwd_sass.csv; head -2 $OUT/bwd_sass.csv | cut -c1-600
rm -f $OUT/bwd.ncu-rep
